"""The intro's short answer, ``book/answer.md``: the book's question answered on its first screen.

Each line is a sentence of a published chapter's own answer, filled with the values that chapter glued
when it was executed (``glued``), so the intro says nothing the chapter does not show and changes when the
chapter is executed again; the closing line says that these are predictions and, from the chapters'
metadata, whether any machine with several GPUs was measured. ``python -m helpers.provenance`` (``make
book``) writes it beside the edition note.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from string import Formatter

from helpers.costmodel.specs import OP_OVERHEAD
from helpers.stats import listed

RECORD = "application/papermill.record/text/plain"
COST_MODEL = "05_cost_model"
YOUR_MODEL = "07_your_model"
# (chapter, bold lead, sentence with the chapter's glue names in braces): the answers of chapter 5's box
LINES = (
    (COST_MODEL, "Network choke", "`LinearNet` on eight H100s (AWS p5.48xlarge) against one H100 (AWS "
     "p5.4xlarge), at a global batch of {recommend_batch}: {answer_linearnet}; {answer_linearnet_verdict}."),
    (COST_MODEL, "GPU choke", "`ConvNet` on the same machines: {answer_convnet}; {answer_convnet_verdict}."),
    (COST_MODEL, "Dollars", "{dollar_headline}"),
)  # fmt: skip


def glued(path: Path) -> dict[str, str]:
    """``{name: text}`` of every value an executed notebook glued, as ``{glue:text}`` shows it (a string
    without its quotes). The notebook is read as the JSON it is: chapter kernels import this module, and
    nbformat's validator takes a second to import."""
    found = {}
    for cell in json.loads(path.read_text())["cells"]:
        for output in cell.get("outputs", []):
            name = output.get("metadata", {}).get("scrapbook", {}).get("name")
            text = output.get("data", {}).get(RECORD)
            if name and text is not None:
                found[name] = ast.literal_eval(text) if text.startswith(("'", '"')) else text
    return found


def answer_note(chapters: list[tuple[Path, dict]], book: Path) -> str:
    """``book/answer.md`` for the book's chapters (``provenance.chapter_studies``: each executed
    notebook's path and ``study`` metadata): an admonition of ``LINES`` from the chapters that have been
    executed, or a line saying which is still missing. Links are relative to ``book``, the folder of the
    page that includes the note."""
    by_stem = {path.stem: path for path, study in chapters if study and path.exists()}
    if COST_MODEL not in by_stem:
        return "*The short answer appears here once chapter 5 has been executed (`make study book`).*\n"
    values = {stem: glued(by_stem[stem]) for stem in {line[0] for line in LINES}}
    lines = [":::{admonition} The short answer", ":class: important"]
    for stem, lead, sentence in LINES:
        missing = [name for _, name, _, _ in Formatter().parse(sentence) if name and name not in values[stem]]
        if missing:
            raise ValueError(f"{by_stem[stem]} glues no {missing[0]!r}: execute it again (make study)")
        lines.append(f"- **{lead}.** {sentence.format(**values[stem])}")
    several = [int(path.stem[:2]) for path, study in chapters
               if len((study.get("hardware") or {}).get("gpus") or []) > 1]  # fmt: skip
    measured = (f"chapter{'s' * (len(several) > 1)} {listed(several)} measured a machine with several GPUs"
                if several
                else "no machine with more than one GPU was measured")  # fmt: skip
    closing = "These are chapter 5's predictions, in parentheses their range over the inputs it is unsure of"
    if OP_OVERHEAD.measured:
        closing += " (its host time per op is one measured host's range, the H200 machine's)"
    closing += f"; {measured}."
    yours = next((path for path, _ in chapters if path.stem == YOUR_MODEL), None)
    if yours is not None:
        closing += (
            f" [Chapter 7]({yours.relative_to(book)}) prices your own model the same way, with one command."
        )
    return "\n".join([*lines, "", closing, ":::", ""])
