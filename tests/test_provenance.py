"""helpers.provenance: banners and the provenance page come from the executed chapters' metadata."""

import json

import nbformat
import pytest

from helpers import provenance
from helpers.results import ResultStore, short_hash

HARDWARE = {
    "cpu_model": "Test Xeon",
    "cpu_cores": 16,
    "usable_cores": 16,
    "memory_bytes": 128 * 2**30,
    "gpus": [{"index": 0, "name": "NVIDIA H200", "memory_bytes": 140 * 2**30, "compute_capability": "9.0"}],
    "gpu_topology": "\tGPU0\nGPU0\t X ",
    "driver": "580.1",
    "cuda": "13.0",
    "nccl": "2.28.9",
    "torch": "2.11.0+cu130",
    "python": "3.11.7",
    "platform": "Linux x86_64",
}


def test_a_chapter_opens_with_its_edition_machine_and_days(tmp_path, monkeypatch):
    store = ResultStore("gpu", root=tmp_path, hardware=HARDWARE)
    store.measure({"kind": "demo"}, dict)  # the machine's first record: its provenance file
    store.measured_at = {f"2026-11-{day}T04:36:42+00:00" for day in (25, 26, 26)}
    assert provenance.edition_line(store) == (
        "**GPU edition** · measured on 1x NVIDIA H200 (140 GiB); 16-core Test Xeon, 2026-11-25 to 2026-11-26"
        " · {ref}`every chapter's hardware <where-the-numbers-come-from>`"
    )
    monkeypatch.setenv("STUDY_RECORDS_OF", store.provenance_id)  # the same records read on another machine
    monkeypatch.setattr(provenance, "fingerprint", lambda: {**HARDWARE, "gpus": [], "usable_cores": 2})
    reader = ResultStore("gpu", root=tmp_path)
    reader.measured_at.add("2026-11-26T04:36:42+00:00")
    assert provenance.edition_line(reader).endswith(
        "2026-11-26 · executed from those records on 2-core Test Xeon, no GPU · {ref}"
        "`every chapter's hardware <where-the-numbers-come-from>`"
    )
    assert "NCCL can start only one rank" in provenance.can_and_cannot(HARDWARE)  # said once, in the intro


def test_page_lists_each_chapter_and_machine(tmp_path, monkeypatch):
    monkeypatch.setenv("STUDY_ROOT", str(tmp_path))
    (tmp_path / "book" / "chapters").mkdir(parents=True)
    (tmp_path / "book" / "_toc.yml").write_text(
        "format: jb-book\nroot: book/intro\nchapters:\n"
        "  - file: book/chapters/01_a\n  - file: book/chapters/02_b\n  - file: book/provenance\n"
    )
    executed = nbformat.v4.new_notebook()
    executed.metadata["study"] = {
        "profile": "gpu", "finished_at": "2026-11-22T03:00:00+00:00", "seconds": 321.5, "hardware": HARDWARE,
    }  # fmt: skip
    nbformat.write(executed, tmp_path / "book" / "chapters" / "01_a.ipynb")
    page = provenance.write_provenance_page().read_text()
    identifier = short_hash(HARDWARE)
    # two tables, each narrow enough for the column: what a chapter shows, then how its page was made
    assert f"| 01_a | GPU edition (`gpu`) | 1x NVIDIA H200 (140 GiB) (`{short_hash(HARDWARE)}`) | — |" in page
    assert "| 01_a | on the machine that measured it | 2026-11-22 03:00 | 321.5 s | — |" in page
    assert f"(`{identifier}`)" in page and f"### Machine `{identifier}`" in page
    assert "| 02_b | not executed yet |" in page
    edition = (tmp_path / "book" / "edition.md").read_text()
    assert edition.startswith("```{note}\n- **Chapter 1** (GPU edition): measured on 1x NVIDIA H200")
    assert "NCCL can start only one rank (it refuses two ranks on one GPU)" in edition
    assert "| driver | 580.1 |" in page and "| NCCL (torch build) | 2.28.9 |" in page
    assert "```text\n\tGPU0\nGPU0\t X \n```" in page


def test_the_edition_says_what_a_cpu_can_and_cannot_show():
    text = provenance.can_and_cannot({**HARDWARE, "gpus": [], "usable_cores": 2})
    assert "shares the same 2 cores" in text and "no speed-up from more devices can appear" in text
    four = {**HARDWARE, "gpus": HARDWARE["gpus"] * 4, "gpu_topology": (
        "\tGPU0\tGPU1\tGPU2\tGPU3\nGPU0\t X \tNV4\tNV4\tNV4\nGPU1\tNV4\t X \tNV4\tNV4\n"
        "GPU2\tNV4\tNV4\t X \tNV4\nGPU3\tNV4\tNV4\tNV4\t X \n")}  # fmt: skip
    assert provenance.can_and_cannot(four).startswith(
        "With 4 GPUs, every pair NV4: a bonded set of 4 NVLinks"
    )


def test_machines_whose_records_are_quoted_are_named_with_their_records(tmp_path, monkeypatch):
    monkeypatch.setenv("STUDY_ROOT", str(tmp_path))
    (tmp_path / "book" / "chapters").mkdir(parents=True)
    (tmp_path / "book" / "_toc.yml").write_text("format: jb-book\nroot: book/intro\nchapters:\n"
                                                "  - file: book/chapters/05_a\n")  # fmt: skip
    cpu = {**HARDWARE, "gpus": [], "gpu_topology": None, "cpu_model": "Test EPYC"}
    executed = nbformat.v4.new_notebook()
    executed.metadata["study"] = {"profile": "cpu", "hardware": cpu}
    nbformat.write(executed, tmp_path / "book" / "chapters" / "05_a.ipynb")
    ResultStore("cpu", hardware=cpu).measure({"kind": "demo"}, lambda: {})  # the chapter's own machine
    gpu = ResultStore("gpu", hardware=HARDWARE)
    for batch in (1, 2):
        gpu.measure({"kind": "step_timing", "batch_size": batch}, lambda: {})
    ResultStore("test-run", hardware={**HARDWARE, "cpu_model": "a test's"}).measure({"kind": "demo"}, dict)
    check = tmp_path / "data" / "results" / "gpu-check" / "nvidia-h200-0.json"
    check.parent.mkdir()
    check.write_text(json.dumps({"hardware": HARDWARE, "checks": []}))
    quoted = provenance.quoted_machines({short_hash(cpu)})
    assert list(quoted) == [short_hash(HARDWARE)]  # not the chapter's machine, not a test run's
    assert quoted[short_hash(HARDWARE)]["sources"] == [
        "`gpu` run: 2 records",
        "`make gpu-check` (nvidia-h200-0.json)",
    ]
    page = provenance.write_provenance_page().read_text()
    assert "## Machines whose records are quoted" in page and "Records: `gpu` run: 2 records;" in page
    edition = (tmp_path / "book" / "edition.md").read_text()
    assert (
        f"measured on another machine (`{short_hash(HARDWARE)}`, 1x NVIDIA H200 (140 GiB); 16-core Test Xeon)"
        in edition
    )


def test_a_chapter_run_on_a_restarted_machine_keeps_the_id_its_records_have(tmp_path, monkeypatch):
    monkeypatch.setenv("STUDY_ROOT", str(tmp_path))
    (tmp_path / "book" / "chapters").mkdir(parents=True)
    toc = "format: jb-book\nroot: book/intro\nchapters:\n" + "".join(
        f"  - file: book/chapters/{name}\n" for name in ("01_a", "02_b")
    )
    (tmp_path / "book" / "_toc.yml").write_text(toc)
    first = {
        **HARDWARE,
        "platform": "Linux 6.18.44-fc-v595 x86_64",
        "gpu_topology": "\x1b[4mGPU0\x1b[0m\nGPU0\t X ",
    }
    ResultStore("gpu", hardware=first).measure({"kind": "demo"}, dict)
    rebooted = {**first, "platform": "Linux 6.18.44-fc-v669 x86_64"}
    for name, hardware in (("01_a", first), ("02_b", rebooted)):
        executed = nbformat.v4.new_notebook()
        executed.metadata["study"] = {"profile": "gpu", "hardware": hardware}
        nbformat.write(executed, tmp_path / "book" / "chapters" / f"{name}.ipynb")
    page = provenance.write_provenance_page().read_text()
    assert page.count(f"(`{short_hash(first)}`)") == 2 and short_hash(rebooted) not in page
    assert page.count("### Machine") == 1 and "```text\nGPU0\nGPU0\t X \n```" in page  # no escape codes


def test_the_book_shows_each_chapters_gpu_edition_where_one_was_executed(tmp_path, monkeypatch):
    """auto: the GPU edition where it finished, else the CPU edition; the note and the page say which
    machine measured each chapter and where it was executed from those records."""
    monkeypatch.setenv("STUDY_ROOT", str(tmp_path))
    (tmp_path / "notebooks").mkdir()
    for name in ("01_a", "02_b"):
        nbformat.write(nbformat.v4.new_notebook(), tmp_path / "notebooks" / f"{name}.ipynb")
    laptop = {**HARDWARE, "gpus": [], "gpu_topology": None, "cpu_model": "Test EPYC", "usable_cores": 2}
    for profile, name, study in (
        ("cpu", "01_a", {"hardware": laptop}),
        ("cpu", "02_b", {"hardware": laptop}),
        ("gpu", "02_b", {"hardware": HARDWARE, "records_of": "h200", "executed_on": laptop,
                         "measured_between": ["2026-11-26T04:36:42+00:00", "2026-11-26T15:41:00+00:00"]}),
        ("gpu", "01_a", {"hardware": HARDWARE}),
    ):  # fmt: skip
        executed = nbformat.v4.new_notebook()
        executed.metadata["study"] = {"profile": profile, "status": "finished", **study}
        if (profile, name) == ("gpu", "01_a"):
            executed.metadata["study"]["status"] = "failed"  # not a finished edition: not shown
        (tmp_path / "book" / "chapters" / profile).mkdir(parents=True, exist_ok=True)
        nbformat.write(executed, tmp_path / "book" / "chapters" / profile / f"{name}.ipynb")
    assert [p.parent.name for p in provenance.published()] == ["cpu", "gpu"]
    assert [p.parent.name for p in provenance.published("cpu")] == ["cpu", "cpu"]
    with pytest.raises(ValueError, match="edition must be one of"):
        provenance.published("tpu")
    provenance.publish()
    toc = (tmp_path / "book" / "_toc.yml").read_text()
    assert "  - file: book/chapters/cpu/01_a\n  - file: book/chapters/gpu/02_b\n" in toc
    note = (tmp_path / "book" / "edition.md").read_text()
    assert (
        "- **Chapter 2** (GPU edition): measured on 1x NVIDIA H200 (140 GiB); 16-core Test Xeon (`h200`) on "
        "2026-11-26, executed from the stored records, on 2-core Test EPYC, no GPU." in note
    )
    page = (tmp_path / "book" / "provenance.md").read_text()
    assert "| 02_b | GPU edition (`gpu`) | 1x NVIDIA H200 (140 GiB) (`h200`) | 2026-11-26 |" in page
    assert "| 02_b | from the stored records, on 2-core Test EPYC, no GPU |" in page


def test_each_machine_shows_how_far_its_speed_moved_across_its_records(tmp_path, monkeypatch):
    monkeypatch.setenv("STUDY_ROOT", str(tmp_path))
    store = ResultStore("gpu", hardware=HARDWARE)
    assert provenance.reference_section(store.provenance_id) == []  # a machine with no records here
    speeds = [{"measured_at": f"t{value}", "cpu_matmul_gflops": value} for value in (50.0, 100.0, 80.0)]
    speeds += [speeds[-1]] * 3  # a reference shared by the next records, timed within the same minute
    monkeypatch.setattr("helpers.results.reference_speed.current", lambda: speeds.pop(0))
    for x in range(4):
        store.measure({"kind": "demo", "x": x}, lambda: {"value": 1})
    old = store.measure({"kind": "demo", "x": 4}, lambda: {"value": 1})
    old.pop("reference")  # a record from before references were kept
    store.path(old["config"]).write_text(json.dumps(old))
    lines = provenance.reference_section(store.provenance_id)
    assert lines[0].startswith(
        "Speed at measurement: 4 of its 5 records carry the reference speed timed at most a minute before "
        "them, 3 distinct references"
    )
    assert "| one CPU thread, float32 product (GFLOP/s) | 3 | 50 | 80 | 100 | 2.00× |" in lines
    one = ResultStore(
        "one", hardware={**HARDWARE, "cpu_model": "Test EPYC"}
    )  # one record referenced, one not
    monkeypatch.setattr(
        "helpers.results.reference_speed.current", lambda: {"measured_at": "t", "cpu_matmul_gflops": 9.0}
    )
    one.measure({"kind": "demo", "x": 0}, lambda: {"value": 1})
    bare = one.measure({"kind": "demo", "x": 1}, lambda: {"value": 1})
    bare.pop("reference")
    one.path(bare["config"]).write_text(json.dumps(bare))
    assert provenance.reference_section(one.provenance_id)[0].startswith(
        "Speed at measurement: 1 of its 2 records carries the reference speed timed at most a minute before "
        "it, 1 distinct reference ("
    )
    old_only = ResultStore("cpu", hardware={**HARDWARE, "gpus": []})
    record = old_only.measure({"kind": "demo"}, lambda: {"value": 1})
    record.pop("reference")
    old_only.path(record["config"]).write_text(json.dumps(record))
    assert provenance.reference_section(old_only.provenance_id)[0] == (
        "Speed at measurement: not recorded; its one record predates the reference speed (a fixed matrix "
        "product and memory copy timed before each new record, `helpers.reference_speed`; see Reproduce the "
        "study, section 5)."
    )
