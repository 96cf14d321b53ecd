"""helpers.book_answer: the intro's short answer is chapter 5's own glued values, and says what it lacks."""

import nbformat
import pytest

from helpers import book_answer

GLUED = {
    "recommend_batch": "100",
    "answer_linearnet": "'a speed-up of 0.683× (0.465–1.03×) for 11.7× the dollars (7.75–17.2×)'",
    "answer_linearnet_verdict": "'dearer whatever the inputs'",
    "answer_convnet": "'a speed-up of 7.51× (3.86–7.64×) for 1.06× the dollars (1.05–2.07×)'",
    "answer_convnet_verdict": "'faster whatever the inputs'",
    "dollar_headline": '"No multi-GPU machine gives a cheaper result."',
}
ONE_GPU = {"gpus": [{"name": "NVIDIA H200"}]}


def executed(path, glued: dict[str, str]):
    """An executed notebook whose one code cell glued ``glued`` (as papermill's records store them)."""
    cell = nbformat.v4.new_code_cell("glue")
    cell.outputs = [
        nbformat.v4.new_output(
            "display_data",
            data={book_answer.RECORD: text},
            metadata={"scrapbook": {"name": name, "mime_prefix": "application/papermill.record/"}},
        )
        for name, text in glued.items()
    ]
    notebook = nbformat.v4.new_notebook(cells=[cell])
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, path)
    return path


def test_the_answer_is_chapter_5_s_glued_sentences_with_a_link_to_chapter_7(tmp_path):
    fifth = executed(tmp_path / "chapters" / "cpu" / "05_cost_model.ipynb", GLUED)
    seventh = executed(tmp_path / "chapters" / "gpu" / "07_your_model.ipynb", {})
    assert book_answer.glued(fifth)["recommend_batch"] == "100"  # a number as it is shown, quotes gone
    chapters = [(fifth, {"hardware": {"gpus": []}}), (seventh, {"hardware": ONE_GPU})]
    note = book_answer.answer_note(chapters, tmp_path)
    assert note.splitlines() == [
        ":::{admonition} The short answer",
        ":class: important",
        "- **Network choke.** `LinearNet` on eight H100s (AWS p5.48xlarge) against one H100 (AWS "
        "p5.4xlarge), at a global batch of 100: a speed-up of 0.683× (0.465–1.03×) for 11.7× the dollars "
        "(7.75–17.2×); dearer whatever the inputs.",
        "- **GPU choke.** `ConvNet` on the same machines: a speed-up of 7.51× (3.86–7.64×) for 1.06× the "
        "dollars (1.05–2.07×); faster whatever the inputs.",
        "- **Dollars.** No multi-GPU machine gives a cheaper result.",
        "",
        "These are chapter 5's predictions, in parentheses their range over the inputs it is unsure of (its "
        "host time per op is one measured host's range, the H200 machine's); no machine with more than one "
        "GPU was measured. [Chapter 7](chapters/gpu/07_your_model.ipynb) prices "
        "your own model the same way, with one command.",
        ":::",
    ]
    eight = {"hardware": {"gpus": [{"name": "NVIDIA H100"}] * 8}}
    several = book_answer.answer_note([(fifth, {"hardware": {}}), (tmp_path / "03_x.ipynb", eight)], tmp_path)
    assert "; chapter 3 measured a machine with several GPUs." in several and "Chapter 7" not in several


def test_an_unexecuted_or_older_chapter_5_is_said_not_guessed(tmp_path):
    absent = tmp_path / "05_cost_model.ipynb"
    assert "once chapter 5 has been executed" in book_answer.answer_note([(absent, {})], tmp_path)
    older = executed(absent, {name: text for name, text in GLUED.items() if name != "dollar_headline"})
    with pytest.raises(ValueError, match=r"05_cost_model.ipynb glues no 'dollar_headline': execute it again"):
        book_answer.answer_note([(older, {"hardware": {}})], tmp_path)
