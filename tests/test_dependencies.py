"""helpers.dependencies: what code a record or a chapter depends on, read from the sources."""

from helpers import dependencies


def test_the_closure_follows_imports_and_launched_workers():
    train = dependencies.closure(frozenset({"helpers.train"}))
    assert {"helpers.train", "helpers.models", "helpers.data", "helpers.results"} <= train
    assert "helpers.ddp" not in train and "helpers.collectives.tasks" not in train
    runs = dependencies.closure(frozenset({"helpers.collectives.runs"}))
    assert "helpers.collectives.tasks" in runs  # started by name in another process, still its code
    assert "helpers.collectives" in runs  # a submodule runs its package's __init__
    assert dependencies.source_file("helpers.") is None and dependencies.source_file("numpy") is None


def test_versions_are_per_module_and_stable():
    train = dependencies.module_version("helpers.train")
    dependencies.code_version.cache_clear()  # computed afresh from the sources, not read from the cache
    assert train == dependencies.module_version("helpers.train") and len(train) == 16
    assert train != dependencies.module_version("helpers.collectives.runs")
    assert dependencies.module_version("test_something") == dependencies.code_version()


def test_imports_read_from_source():
    code = (
        "from helpers import chapter, data\nfrom helpers.costmodel import money\n"
        'import helpers.train\nx = "helpers.ddp"'
    )
    assert dependencies.imported_helpers(code) == {
        "helpers.chapter", "helpers.data", "helpers.costmodel.money", "helpers.train", "helpers.ddp",
    }  # fmt: skip


def test_bookkeeping_does_not_age_a_record(tmp_path, monkeypatch):
    """A record's version follows the measuring code, not the store or the hardware probe around it."""
    package = tmp_path / "helpers"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "results.py").write_text("from helpers.hardware import probe\n")
    (package / "hardware.py").write_text("def probe(): return 1\n")
    (package / "train.py").write_text("from helpers.results import store\nfrom helpers import models\n")
    (package / "models.py").write_text("SIZE = 1\n")
    monkeypatch.setattr(dependencies, "PACKAGE", package)
    dependencies.code_version.cache_clear()
    dependencies.closure.cache_clear()
    try:
        before = dependencies.module_version("helpers.train")
        (package / "hardware.py").write_text("def probe(): return 2\n")
        dependencies.code_version.cache_clear()
        assert dependencies.module_version("helpers.train") == before
        assert "helpers.results" in dependencies.closure(frozenset({"helpers.train"}))  # chapters see it
        (package / "models.py").write_text("SIZE = 2\n")
        dependencies.code_version.cache_clear()
        assert dependencies.module_version("helpers.train") != before
    finally:
        dependencies.code_version.cache_clear()
        dependencies.closure.cache_clear()
