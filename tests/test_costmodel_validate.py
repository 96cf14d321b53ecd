"""helpers.costmodel.validate: the four models profiled per batch through the store (reused on a rerun,
stopped by its limit with what it finished kept), read back per machine; bad input is one line."""

import functools

import pytest

from helpers.advise import measure
from helpers.costmodel import validate
from helpers.results import ResultStore


@pytest.fixture(scope="module")
def mel_cnn():
    """Chapter 7's MelCNN as the sweep counts it: the smallest of the four to profile on a CPU."""
    return validate.counted_models(["MelCNN"])


def test_the_four_models_are_the_books_two_and_chapter_sevens_two():
    names = [c.label for c in validate.counted_models().values()]
    assert names == ["LinearNet", "ConvNet", "MelCNN", "WaveTransformer"]


def test_every_batch_and_seed_is_profiled_once_and_reused(tmp_path, mel_cnn):
    store = ResultStore("scratch", root=tmp_path)
    first = measure.profile_sweep(store, mel_cnn, [3, 2, 3], repeats=2)
    runs = [(r["config"]["batch_size"], r["config"]["seed"]) for r in first]
    assert runs == [(2, 0), (2, 1), (3, 0), (3, 1)]
    assert {r["kind"] for r in first} == {validate.PROFILE_KIND}
    again = measure.profile_sweep(store, mel_cnn, [2, 3], repeats=2, time_limit_seconds=-1.0)
    assert again == []  # the limit is checked before each run: nothing, not even a reused record
    reused = measure.profile_sweep(store, mel_cnn, [2, 3], repeats=2)
    assert [r["measured_at"] for r in reused] == [r["measured_at"] for r in first]
    frame = validate.profile_frame(first)
    assert list(frame.columns) == ["machine", "model", "batch", "seed", "step (ms)", "host issue (ms)",
                                   "kernels (ms)"]  # fmt: skip
    assert set(frame["model"]) == {"MelCNN"} and (frame["kernels (ms)"] == 0.0).all()  # no GPU here
    phases = first[0]["result"]["phases"]
    assert frame["host issue (ms)"][0] == pytest.approx(sum(p["host_seconds"] for p in phases) * 1e3)


def test_the_command_reads_the_stored_profiles_per_machine(tmp_path, monkeypatch, capsys, mel_cnn):
    monkeypatch.setattr(validate, "ResultStore", functools.partial(ResultStore, root=tmp_path))
    assert validate.main(["--results-run", "scratch"]) == 2
    assert "holds no advise_step_profile records" in capsys.readouterr().err
    measure.profile_sweep(ResultStore("scratch", root=tmp_path), mel_cnn, [2, 4], repeats=1)
    assert validate.main(["--results-run", "scratch"]) == 0
    out = capsys.readouterr().out
    assert f"machine {ResultStore('scratch', root=tmp_path).provenance_id}" in out
    assert out.count("MelCNN") == 1 and "host issue (ms)" in out


def test_bad_batches_are_one_line_before_any_work(capsys):
    assert validate.main(["--batches", "16,x"]) == 2
    assert capsys.readouterr().err.strip().count("\n") == 0
