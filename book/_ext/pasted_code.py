"""Glued text shows `name` as code and \\(S_{\\min}\\) as math, as the notebooks' own Markdown does.

myst-nb pastes a glued ``text/plain`` value ({glue:text}`key`) as literal text, so the backticks of the
helpers' sentences ("`ConvNet` runs faster") would reach the reader as backticks, and their symbols as
TeX. This transform turns each backtick span of a pasted text into an inline literal and each \\(…\\)
span into inline math (never "$": in the helpers' sentences "$" is a dollar), and leaves everything else
as it was.
"""

import re

from docutils import nodes
from sphinx.transforms import SphinxTransform

SPANS = re.compile(r"`(?P<code>[^`]+)`|\\\((?P<math>.+?)\\\)")


def code_spans(text: str) -> list[nodes.Node]:
    """``text`` as text nodes, with an inline literal for each `backtick span` and inline math for each
    \\(TeX\\) span."""
    parts, last = [], 0
    for match in SPANS.finditer(text):
        if match.start() > last:
            parts.append(nodes.Text(text[last : match.start()]))
        if match.group("code") is not None:
            parts.append(nodes.literal(match.group("code"), match.group("code")))
        else:
            parts.append(nodes.math(match.group("math"), match.group("math")))
        last = match.end()
    if last < len(text):
        parts.append(nodes.Text(text[last:]))
    return parts


class PastedCodeSpans(SphinxTransform):
    """Every ``pasted-text`` inline (myst-nb's glue:text role) gets its backtick spans as code and its
    \\(…\\) spans as math."""

    default_priority = 500

    def apply(self, **kwargs) -> None:
        for node in list(self.document.findall(nodes.inline)):
            text = node.astext()
            if "pasted-text" in node["classes"] and ("`" in text or "\\(" in text):
                node.children = []
                node.extend(code_spans(text))


def setup(app):
    app.add_transform(PastedCodeSpans)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
