"""helpers.study: profiles and chapters are checked before any work; outputs are replaced atomically."""

import nbformat
import pytest

from helpers import study


def test_every_profile_plans_every_chapter():
    chapters = {path.stem for path in study.notebooks_dir().glob("[0-9][0-9]_*.ipynb")}
    for profile in study.PROFILES:
        planned = study.plan(profile)
        assert {c.name for c in planned} == chapters
        assert all(c.parameters["results_run"] == profile for c in planned)
        assert all(c.output.parent == study.chapters_dir() for c in planned)


def test_profile_parameters_are_known_notebook_parameters():
    for profile in study.PROFILES:
        for chapter in study.plan(profile):
            notebook = nbformat.read(chapter.source, as_version=4)
            cell = next(c for c in notebook.cells if "parameters" in c.metadata.get("tags", []))
            declared = {line.split("=")[0].strip() for line in cell.source.splitlines() if "=" in line}
            assert set(chapter.parameters) <= declared, (profile, chapter.name)


def test_unknown_profile_and_chapter_are_refused():
    with pytest.raises(ValueError, match="unknown profile 'fast'"):
        study.resolve_profile("fast")
    with pytest.raises(ValueError, match="unknown chapter"):
        study.plan("smoke", ["99_nothing"])


def test_gpu_profile_needs_gpus(monkeypatch):
    monkeypatch.setattr(study, "visible_gpus", lambda: 0)
    with pytest.raises(ValueError, match="needs CUDA devices"):
        study.resolve_profile("gpu")
    assert study.resolve_profile("auto") == "cpu"
    monkeypatch.setattr(study, "visible_gpus", lambda: 4)
    assert study.resolve_profile("auto") == "gpu"


def test_study_yaml_naming_a_missing_chapter_is_refused(tmp_path):
    config = tmp_path / "study.yml"
    config.write_text("cpu:\n  07_missing: {epochs: 1}\n")
    with pytest.raises(ValueError, match="unknown chapters: 07_missing"):
        study.plan("cpu", config=config)


def test_fingerprint_follows_notebook_and_parameters(tmp_path):
    source = tmp_path / "01_x.ipynb"
    nbformat.write(nbformat.v4.new_notebook(), source)
    chapter = study.Chapter("01_x", source, tmp_path / "out.ipynb", {"epochs": 1})
    assert not chapter.is_current()
    changed = study.Chapter("01_x", source, tmp_path / "out.ipynb", {"epochs": 2})
    assert chapter.fingerprint() != changed.fingerprint()
    executed = nbformat.v4.new_notebook()
    executed.metadata["study"] = {"fingerprint": chapter.fingerprint(), "status": "finished"}
    nbformat.write(executed, chapter.output)
    assert chapter.is_current() and not changed.is_current()
