"""helpers.scaling: the splits a run refuses, speed-up and efficiency, and gradient accumulation equal
to DDP (a real two-rank launch against one accumulating process)."""

from types import SimpleNamespace

import pandas as pd
import pytest

from helpers import scaling
from helpers.results import ResultStore
from helpers.sharding import runs as sharding_runs


def test_a_global_batch_must_divide_into_ranks_and_micro_batches():
    assert scaling.check_split(48, 4, 3) == 4
    with pytest.raises(ValueError, match="a global batch of 50 does not divide into 4 rank"):
        scaling.check_split(50, 4)
    with pytest.raises(ValueError, match="micro_batches"):
        scaling.check_split(48, 4, 0)
    with pytest.raises(ValueError, match="does not divide"):
        scaling.scaling_variations([1, 2, 3], 40, 20)


def test_variations_hold_the_global_batch_or_the_per_rank_batch():
    variations = scaling.scaling_variations([1, 2, 4], 40, 10)
    strong = [v["global_batch_size"] for v in variations if v["scaling"] == "strong"]
    weak = [v["global_batch_size"] for v in variations if v["scaling"] == "weak"]
    assert strong == [40, 40, 40] and weak == [10, 20, 40]


def launches(model, scaling_kind, ranks, medians):
    """One (variation, record) pair per launch, each launch's three steps around its median."""
    return [
        ({"model": model, "scaling": scaling_kind, "ranks": ranks, "launch": number},
         {"result": {"step_seconds_all": [median * 0.99, median, median * 1.01]}})
        for number, median in enumerate(medians)
    ]  # fmt: skip


def test_efficiency_of_strong_and_weak_scaling_across_launches():
    runs = launches("M", "strong", 1, [2.0, 2.1, 1.9]) + launches("M", "strong", 2, [1.25, 1.3, 1.2])
    runs += launches("M", "weak", 1, [1.0, 1.05, 0.95]) + launches("M", "weak", 2, [1.25, 1.3, 1.2])
    table = scaling.efficiency_table(runs).set_index(["scaling", "ranks"])
    strong = table.loc[("strong", 2)]
    assert strong["speedup"] == pytest.approx(2.0 / 1.25) and strong["efficiency"] == pytest.approx(0.8)
    # three launches a side: the interval pairs the extreme launch medians, 1.9 / 1.3 to 2.1 / 1.2
    assert (strong["speedup_low"], strong["speedup_high"]) == pytest.approx((1.9 / 1.3, 2.1 / 1.2))
    assert strong["verdict"] == "faster" and strong["launches"] == 3
    weak = table.loc[("weak", 2)]  # twice the samples per step: 1.25 s for two one-rank steps' work
    assert weak["speedup"] == pytest.approx(1.0 / 0.625) and weak["efficiency"] == pytest.approx(0.8)
    assert weak["verdict"] == "faster"  # more samples per second, though each step is slower
    # one rank against its own launches: 0.90-1.11, too wide to exclude a 10 % difference
    assert table.loc[("strong", 1), "verdict"] == "not resolved"


def test_weak_scaling_that_loses_throughput_is_slower():
    runs = launches("M", "weak", 1, [1.0, 1.0, 1.0]) + launches("M", "weak", 4, [4.4, 4.5, 4.6])
    row = scaling.efficiency_table(runs).set_index(["scaling", "ranks"]).loc[("weak", 4)]
    assert row["speedup"] == pytest.approx(1 / 1.125) and row["verdict"] == "slower"
    assert (row["speedup_low"], row["speedup_high"]) == pytest.approx((1 / 1.15, 1 / 1.1))


def test_accumulation_table_compares_k_ranks_and_one_pass_with_k_micro_batches():
    def pairs(variation, medians):
        return [({**variation, "launch": n}, {"result": {"step_seconds_all": [m * 0.99, m, m * 1.01]}})
                for n, m in enumerate(medians)]  # fmt: skip

    accumulated = pairs({"model": "M", "micro_batches": 2}, [2.0, 2.1, 1.9])
    accumulated += pairs({"model": "M", "micro_batches": 1}, [1.9, 2.0, 2.1])  # one pass: no row of its own
    distributed = pairs({"model": "M", "ranks": 2}, [1.0, 1.05, 0.95])
    distributed += pairs({"model": "M", "ranks": 1}, [9.0, 9.0, 9.0])  # not a candidate: a DDP launch
    table = scaling.accumulation_table(accumulated, distributed).set_index("candidate")
    assert list(table.index) == ["2 DDP ranks", "one pass"] and set(table["k"]) == {2}
    ranks = table.loc["2 DDP ranks"]
    assert ranks["speedup"] == pytest.approx(2.0) and ranks["verdict"] == "faster"
    assert (ranks["low"], ranks["high"]) == pytest.approx((1.9 / 1.05, 2.1 / 0.95))
    one_pass = table.loc["one pass"]  # 1.9–2.1 against 1.9–2.1: 0.90–1.11, too wide to call
    assert one_pass["speedup"] == pytest.approx(1.0) and one_pass["verdict"] == "not resolved"
    assert scaling.phrase(ranks) == "faster, 2.00× (1.81–2.21×, 3 launches each)"
    view = scaling.accumulation_view(scaling.accumulation_table(accumulated, distributed))
    assert view.loc[("M", 2, "2 DDP ranks"), "range of launch ratios"] == "1.81–2.21×"  # 3 a side
    shown = view.loc[("M", 2, "2 DDP ranks")]  # in ms, so that their ratio reads as the speed-up beside
    assert (shown["accumulating: step (ms)"], shown["run compared: step (ms)"]) == ("2,000", "1,000")
    assert shown["speed-up over accumulating"] == "2.00"  # the decimals of its interval


def test_the_shared_launch_is_named_only_where_strong_and_weak_meet():
    assert scaling.shared_launch_note([1, 2, 4], 20, 40).startswith(
        "At k = 2, 2 × 20 is the global batch of 40"
    )
    assert scaling.shared_launch_note([1, 4], 20, 40) == ""


def test_the_efficiency_view_reads_with_units():
    runs = launches("M", "strong", 1, [2.0, 2.1, 1.9]) + launches("M", "strong", 2, [1.25, 1.3, 1.2])
    view = scaling.efficiency_view(scaling.efficiency_table(runs))
    row = view.loc[("M", "strong", 2)]
    assert row["step time (ms)"] == "1,250" and row["efficiency E(k)"] == 0.8
    assert row["range of launch ratios"] == "1.46–1.75×"  # 1.9 / 1.3 to 2.1 / 1.2: 3 launches a side
    baseline = view.loc[("M", "strong", 1)]  # S(1) = E(1) = 1: no verdict against itself, but its spread
    assert baseline.iloc[1:].tolist() == [
        "2,000", "1", "0.905–1.105×", 1.0, "the baseline (its launches against each other)"
    ]  # fmt: skip


def test_accumulating_k_micro_batches_equals_k_ddp_ranks(recordings, no_leftovers):
    parity = scaling.accumulation_parity(
        "ConvNet", 2, global_batch_size=8, steps=4, train_samples=16, optimizer="sgd", lr=0.05,
        time_limit_seconds=180,
    )  # fmt: skip
    assert parity["tensors"] == 10
    assert parity["largest_change"] > 1e-4  # the weights did move
    assert parity["largest_difference"] < 1e-3 * parity["largest_change"]


def test_accumulation_reports_every_step(fsdd):
    from helpers.data import take

    train_set = take(fsdd.split("train"), 12, 0)
    _model, result = scaling.accumulate("ConvNet", train_set, global_batch_size=6, micro_batches=3, steps=3)
    assert len(result["step_losses"]) == 3 and len(result["step_seconds_all"]) == 2
    assert "3 micro-batch(es) of 2" in result["method"]


def test_sentences_put_the_verdict_first_without_nested_parentheses():
    runs = launches("M", "strong", 1, [2.0, 2.1, 1.9]) + launches("M", "strong", 2, [1.25, 1.3, 1.2])
    sentence = scaling.efficiency_sentences(scaling.efficiency_table(runs), 2)
    assert sentence == (
        "M keeps 0.80 of the ideal under strong scaling; its verdict against one rank: "
        "faster, 1.60× (1.46–1.75×, 3 launches each)."
    )
    table = pd.DataFrame([{"model": "M", "k": 2, "candidate": "2 DDP ranks", "speedup": 2.0, "low": 1.5,
                           "high": 2.5, "verdict": "faster", "launch_counts": (3, 3)}])  # fmt: skip
    assert scaling.accumulation_sentences(table, 2, lead="Here, for") == (
        "Here, for M, against 2 accumulated micro-batches, 2 DDP ranks: faster, 2.00× (1.50–2.50×, "
        "3 launches each)."
    )


H200 = {"usable_cores": 16, "gpus": [{"name": "NVIDIA H200"}]}
TWO_CORES = {"usable_cores": 2, "gpus": []}


def test_ranks_on_one_device_are_read_against_one_devices_speed_not_k_devices():
    runs = launches("M", "strong", 1, [2.0, 2.1, 1.9]) + launches("M", "strong", 2, [1.25, 1.3, 1.2])
    assert scaling.efficiency_sentences(scaling.efficiency_table(runs), 2, shared=True) == (
        "M, strong scaling: faster, 1.60× (1.46–1.75×, 3 launches each)."
    )
    # weak scaling compares samples per second: steps 4× as long for 2× the samples take 2× as long per sample
    weak = launches("M", "weak", 1, [1.0, 1.05, 0.95]) + launches("M", "weak", 2, [4.0, 4.2, 3.8])
    assert scaling.efficiency_sentences(scaling.efficiency_table(weak), 2, shared=True) == (
        "M, weak scaling in samples per second: slower, taking 2.00× as long per sample (1.81–2.21×, "
        "3 launches each)."
    )
    gpu = scaling.ranks_setting(H200, "gloo", "cuda", 4)
    assert gpu["ranks_where"] == "4 Gloo ranks time-sharing the one NVIDIA H200"
    assert gpu["ceiling"] == "one" and "Each rank has 4 of the 16 cores." in gpu["sharing"]
    assert "NCCL refuses two ranks on one GPU" in gpu["sharing"] and "cores ÷" not in gpu["sharing"]
    cpu = scaling.ranks_setting(TWO_CORES, "gloo", "cpu", 4)
    assert cpu["ranks_where"] == "4 Gloo ranks sharing 2 cores" and cpu["ceiling"] == "one"
    assert "(at least one, so 4 ranks oversubscribe 2 cores)" in cpu["sharing"]
    assert "oversubscribe" not in scaling.ranks_setting(TWO_CORES, "gloo", "cpu", 2)["sharing"]
    own = scaling.ranks_setting({"usable_cores": 16, "gpus": [{"name": "H100"}] * 4}, "nccl", "cuda", 4)
    assert own["ranks_where"] == "4 NCCL ranks, one GPU each" and own["ceiling"] == "k"
    assert scaling.shares_device(H200, "cuda", 2) and not scaling.shares_device(H200, "cuda", 1)


def test_the_accumulation_caveat_says_only_what_applies_to_the_device():
    def table(verdict):
        return pd.DataFrame([{"k": 4, "candidate": "4 DDP ranks", "verdict": verdict},
                             {"k": 4, "candidate": "one pass", "verdict": "faster"}])  # fmt: skip

    assert scaling.accumulation_caveat(table("slower"), 4, TWO_CORES, "cpu") == ""  # nothing to explain
    assert scaling.accumulation_caveat(table("faster"), 4, TWO_CORES, "cpu").startswith(
        "Where 4 processes here beat one process accumulating, that is not a second device"
    )
    assert scaling.accumulation_caveat(table("slower"), 4, H200, "cuda") == (
        "Here the 4 DDP ranks time-share one GPU and all-reduce through host memory, so their comparison "
        "with one process accumulating prices that time-sharing, not 4 GPUs against one."
    )
    four = {"usable_cores": 16, "gpus": [{"name": "H100"}] * 4}
    assert scaling.accumulation_caveat(table("faster"), 4, four, "cuda") == ""


def test_accumulation_is_measured_in_the_rounds_of_the_ddp_launches(tmp_path, monkeypatch):
    measured = []

    def fake_launch(world_size, time_limit_seconds, launch_number, **settings):
        measured.append(("ddp", launch_number, world_size, settings["global_batch_size"]))
        return {"result": {"step_seconds_all": [0.2, 0.2]}}

    def fake_accumulate(model_name, train_set, **settings):
        measured.append(("accumulation", settings["micro_batches"]))
        return None, {"step_seconds_all": [0.3, 0.3]}

    monkeypatch.setattr(sharding_runs, "run_sharding", fake_launch)
    monkeypatch.setattr(scaling, "accumulate", fake_accumulate)
    monkeypatch.setattr(scaling, "load_fsdd", lambda: SimpleNamespace(split=lambda name: None))
    monkeypatch.setattr(scaling, "take", lambda *arguments: None)
    store = ResultStore("test", root=tmp_path, hardware={"machine": "test"})
    variations = scaling.scaling_variations([1, 2], 8, 4)  # k = 2: strong and weak are one launch
    settings = {"backend": "gloo", "device": "cpu", "gpus": None, "steps": 3, "train_samples": 16}
    runs = scaling.stored_scaling_runs(store, ["LinearNet"], variations, launches=2, **settings)
    one_round = [("ddp", 1, 8), ("ddp", 1, 4), ("ddp", 2, 8), ("accumulation", 1), ("accumulation", 2)]
    assert [m if m[0] == "accumulation" else (m[0], *m[2:]) for m in measured] == one_round * 2
    assert [m[1] for m in measured if m[0] == "ddp"] == [0, 0, 0, 1, 1, 1]
    assert len(runs["ddp"]) == 8 and len(runs["accumulation"]) == 4
    # the weak launches (another global batch) are not candidates: 2 launches a side, 0.3 s against 0.2 s
    table = scaling.accumulation_table(runs["accumulation"], runs["ddp"]).set_index("candidate")
    assert table.loc["2 DDP ranks", "launches"] == 2
    assert table.loc["2 DDP ranks", "launch_counts"] == (2, 2)
    assert table.loc["2 DDP ranks", "speedup"] == pytest.approx(1.5)
    # round 1's accumulation removed (another day, another speed): round 1 is measured again whole,
    # its DDP launches too; round 0 is reused untouched
    store.path(runs["accumulation"][3][1]["config"]).unlink()
    measured.clear()
    tomorrow = ResultStore("test", root=tmp_path, hardware={"machine": "test"})  # the next run
    again = scaling.stored_scaling_runs(tomorrow, ["LinearNet"], variations, launches=2, **settings)
    assert sorted(measured, key=str) == sorted(
        [("accumulation", 2), ("accumulation", 1), ("ddp", 1, 1, 8), ("ddp", 1, 1, 4), ("ddp", 1, 2, 8)],
        key=str,
    )
    assert again["ddp"][:4] == runs["ddp"][:4]


def test_the_rounds_note_says_when_records_predate_the_rounds():
    def pairs(times, stamp=None):
        return [({}, {"measured_at": t, **({"measured_with": stamp} if stamp else {})}) for t in times]

    ddp = pairs(["2026-11-26T15:52:00+00:00", "2026-11-26T20:58:00+00:00"])
    after = pairs(["2026-11-26T21:03:00+00:00", "2026-11-26T21:04:00+00:00"])
    assert scaling.rounds_note({"ddp": ddp, "accumulation": after}) == (
        "These records were not measured in rounds: from 2026-11-26 15:52 to "
        "21:04 UTC in one session, with the accumulation runs after every DDP launch (the first of them "
        "5 min after the last DDP launch), so the ratios against DDP below compare runs made one after the "
        "other, not side by side."
    )
    soon = pairs(["2026-11-26T20:58:20+00:00"])
    assert "(the first of them under a minute after" in scaling.rounds_note(
        {"ddp": ddp, "accumulation": soon}
    )
    before = pairs(["2026-11-25T10:00:00+00:00"])
    assert scaling.rounds_note({"ddp": ddp, "accumulation": before}) == (
        "These records were not measured in rounds: the DDP launches from "
        "2026-11-26 15:52 UTC "
        "to 2026-11-26 20:58 UTC, the accumulation runs from 2026-11-25 10:00 UTC to 2026-11-25 10:00 UTC, "
        "so the ratios against DDP below compare runs not made side by side."
    )
    stamped = {"ddp": pairs(["2026-11-26T15:52:00+00:00"], "r"), "accumulation": pairs(["x"], "r")}
    assert scaling.rounds_note(stamped) == ""


def test_the_parity_table_reads_optimizers_by_name_and_numbers_as_written():
    """Issue 38, 6: the table showed "sgd" and "3.15e-01"."""
    parities = {
        "sgd": {"largest_difference": 0.0, "largest_change": 3.9e-4, "largest_weight": 0.315},
        "adam": {"largest_difference": 4.0e-3, "largest_change": 1.0e-3, "largest_weight": 0.5},
    }
    table = scaling.parity_table(parities)
    assert table.loc["adam", "difference / move"] == 4.0  # 4.0e-3 / 1.0e-3
    shown = scaling.parity_view(table)
    assert list(shown.index) == ["SGD", "Adam"]
    assert shown.loc["SGD"].tolist() == ["0", "3.9 × 10⁻⁴", "0.32", "0"]
    assert shown.loc["Adam", "largest weight difference"] == "0.0040"
