"""Glued text shows `name` as code, as the notebooks' own Markdown does.

myst-nb pastes a glued ``text/plain`` value ({glue:text}`key`) as literal text, so the backticks of the
helpers' sentences ("`ConvNet` runs faster") would reach the reader as backticks. This transform turns
each backtick span of a pasted text into an inline literal, and leaves everything else as it was.
"""

import re

from docutils import nodes
from sphinx.transforms import SphinxTransform

CODE_SPAN = re.compile(r"`([^`]+)`")


def code_spans(text: str) -> list[nodes.Node]:
    """``text`` as text nodes, with an inline literal for each `backtick span`."""
    parts, last = [], 0
    for match in CODE_SPAN.finditer(text):
        if match.start() > last:
            parts.append(nodes.Text(text[last : match.start()]))
        parts.append(nodes.literal(match.group(1), match.group(1)))
        last = match.end()
    if last < len(text):
        parts.append(nodes.Text(text[last:]))
    return parts


class PastedCodeSpans(SphinxTransform):
    """Every ``pasted-text`` inline (myst-nb's glue:text role) with backtick spans gets them as code."""

    default_priority = 500

    def apply(self, **kwargs) -> None:
        for node in list(self.document.findall(nodes.inline)):
            text = node.astext()
            if "pasted-text" in node["classes"] and "`" in text:
                node.children = []
                node.extend(code_spans(text))


def setup(app):
    app.add_transform(PastedCodeSpans)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
