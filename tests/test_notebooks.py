"""Conventions every chapter notebook keeps (nbval itself runs them: see the README's test command)."""

import re

import nbformat
import pytest

from helpers import phone
from helpers.study import notebooks_dir

NOTEBOOKS = sorted(notebooks_dir().glob("[0-9][0-9]_*.ipynb"))
HIDDEN = {"remove-input", "hide-input", "remove-cell", "hide-cell"}
FOLDED = {"hide-input", "hide-output", "hide-cell"}  # a toggle the reader opens
# plumbing a reader need not see: the results store, progress bars, fallbacks for a missing device or
# for a table with no rows
BOOKKEEPING = re.compile(r"\bstore\b|stored_|tqdm\(|^\s*else:\s*$|\bif len\(|\.empty\b(?!\()", re.MULTILINE)
PAGE_WIDTH = 96  # characters of code the book's column shows without scrolling


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_parameterised_executed_and_clean(path):
    notebook = nbformat.read(path, as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    tags = [set(cell.metadata.get("tags", [])) for cell in code]
    assert "parameters" in tags[0], "the first code cell must be papermill's parameters cell"
    assert notebook.metadata["kernelspec"]["name"] == "python3"
    assert all(cell.execution_count for cell in code), "committed with the outputs of its defaults"
    assert not [o for cell in code for o in cell.outputs if o.output_type == "error"]
    assert any("nbval-check-output" in t for t in tags), "exact cells are nbval-checked"
    assert "def " not in "".join(cell.source for cell in code), "logic belongs in src/helpers"
    figures = [
        o.data["text/html"]
        for cell in code
        for o in cell.outputs
        if "<picture>" in o.get("data", {}).get("text/html", "")
    ]
    # a cell whose last expression is the figure it drew shows it twice
    assert len(figures) == len(set(figures)), "a figure is shown twice"
    # every figure in its two layouts (phone.picture_html), none as a bare PNG that a phone shrinks
    assert figures and all(f'<source media="{phone.PHONE_SCREEN}"' in figure for figure in figures)
    assert not [o for cell in code for o in cell.outputs if "image/png" in o.get("data", {})]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_a_chapter_reads_like_a_book(path):
    notebook = nbformat.read(path, as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    setup = code[1]
    assert "chapter.start(globals())" in setup.source and "remove-input" in setup.metadata["tags"]
    for cell in code[2:]:
        hidden = HIDDEN & set(cell.metadata.get("tags", []))
        assert hidden or "import " not in cell.source, f"set-up code shown to readers:\n{cell.source[:200]}"
        assert "NBVAL" not in cell.source, "nbval markers are tags, not comments readers would see"
        if not hidden:
            wide = [line for line in cell.source.splitlines() if len(line) > PAGE_WIDTH]
            assert not wide, f"code runs off the page: {wide[0]}"
            # bookkeeping stays out of view: numbers for the prose are glued in hidden cells
            assert "glue(" not in cell.source, f"glue calls shown to readers:\n{cell.source[:200]}"
            assert "# fmt:" not in cell.source, f"formatter directives shown to readers:\n{cell.source[:200]}"
            assert not BOOKKEEPING.search(cell.source), f"bookkeeping shown to readers:\n{cell.source[:200]}"
        if FOLDED & set(cell.metadata.get("tags", [])):
            label = cell.metadata.get("mystnb", {}).get("code_prompt_show", "")
            assert label.startswith("Show "), f"a toggle without a label:\n{cell.source[:200]}"
    prose = "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "markdown")
    assert prose.startswith("# ") and "**What this chapter answers.**" in prose
    assert "## Takeaways" in prose and "**Try it on your hardware:** {glue:text}`rerun`" in prose


PYTHON_VALUES = re.compile(r"\b(True|False|None)\b")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_printed_outputs_read_in_words(path):
    """A printed flag reads "yes" or "no" (``chapter.word``), never Python's True, False or None."""
    code = [cell for cell in nbformat.read(path, as_version=4).cells if cell.cell_type == "code"]
    printed = [output.text for cell in code for output in cell.outputs if output.output_type == "stream"]
    assert not [text for text in printed if PYTHON_VALUES.search(text)]


UNESCAPED_PRICE = re.compile(r"(?<!\\)\$\d{1,3}(?:,\d{3})*(?:\.\d+)?(?:[\s.,;:)]|$)")


@pytest.mark.parametrize(
    "path", [*NOTEBOOKS, *sorted(notebooks_dir().parent.glob("book/*.md"))], ids=lambda p: p.name
)
def test_dollar_amounts_in_prose_are_escaped(path):
    """MyST reads "$" as math: a price is written \\$8,000, so that it can never pair with another "$"."""
    if path.suffix == ".md":
        prose = path.read_text()
    else:
        cells = nbformat.read(path, as_version=4).cells
        prose = "\n".join(cell.source for cell in cells if cell.cell_type == "markdown")
    assert not UNESCAPED_PRICE.findall(prose)


GLUE_REFERENCE = re.compile(r"\{glue(?::\w+)?\}`(\w+)(?::[^`]*)?`")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_number_the_prose_names_is_glued_by_the_notebook(path):
    """A ``{glue:text}`name``` whose name no cell glues builds as a warning, which the book's build turns
    into a failure: the committed (smoke) outputs must glue every name the prose uses."""
    notebook = nbformat.read(path, as_version=4)
    named = {name for cell in notebook.cells if cell.cell_type == "markdown"
             for name in GLUE_REFERENCE.findall(cell.source)}  # fmt: skip
    glued = {output.metadata["scrapbook"]["name"] for cell in notebook.cells if cell.cell_type == "code"
             for output in cell.get("outputs", []) if "scrapbook" in output.get("metadata", {})}  # fmt: skip
    assert not named - glued, f"named in the prose but glued by no cell: {sorted(named - glued)}"
