"""helpers.sharding.runs: collectives per strategy exactly, their prices, and the checks of a launch
(the launches themselves run in tests/test_sharding_tasks.py)."""

import pytest

from helpers.sharding import runs

LINEAR_BYTES = 12_102_220 * 4


def test_strategies_and_stages_are_checked():
    assert [runs.strategy_of(stage) for stage in range(4)] == ["ddp", "zero1", "zero2", "fsdp"]
    with pytest.raises(ValueError, match="ZeRO stage must be one of"):
        runs.strategy_of(4)
    with pytest.raises(ValueError, match="strategy must be one of"):
        runs.sharding_config(strategy="zero4")
    with pytest.raises(ValueError, match="unknown sharding setting"):
        runs.sharding_config(stages=3)
    with pytest.raises(ValueError, match="steps must be at least 2"):
        runs.sharding_config(steps=1)


def test_gathered_bytes_pad_each_tensor_to_whole_rows_per_rank():
    assert runs.gathered_bytes("LinearNet", 1) == LINEAR_BYTES
    assert runs.gathered_bytes("LinearNet", 2) == LINEAR_BYTES  # every first dimension is even
    # k = 4: the 10-row weight of Linear(100, 10) and Linear(10, 10) and their biases get 12 rows
    padding = 2 * 100 + 2 + 2 * 10 + 2
    assert runs.gathered_bytes("LinearNet", 4) == LINEAR_BYTES + padding * 4


def test_expected_collectives_per_strategy():
    def table(strategy, k=2):
        frame = runs.expected_collectives("LinearNet", strategy, k)
        return {row.operation: (row.calls, row.bytes) for row in frame.itertuples()}

    assert table("ddp") == {"all_reduce": (1, LINEAR_BYTES)}  # one bucket: 48 MB ≥ 25 MiB cap at the end
    assert table("zero1") == {"all_reduce": (1, LINEAR_BYTES), "broadcast": (8, LINEAR_BYTES)}
    assert table("zero2") == {"all_gather_into_tensor": (4, LINEAR_BYTES),
                              "reduce_scatter_tensor": (4, LINEAR_BYTES)}  # fmt: skip
    assert table("fsdp") == {"all_gather_into_tensor": (8, 2 * LINEAR_BYTES),
                             "reduce_scatter_tensor": (4, LINEAR_BYTES)}  # fmt: skip


def test_link_bytes_and_prices_follow_the_ring_bounds():
    assert runs.link_bytes("all_reduce", 100, 4) == 150
    assert runs.link_bytes("all_gather_into_tensor", 100, 4) == 75
    assert runs.link_bytes("broadcast", 100, 4) == 100
    priced = runs.priced_traffic(["LinearNet"], 2, {"test": (1e-3, 1e-9)}).set_index("strategy")
    n = LINEAR_BYTES
    assert priced.loc["ddp", "link bytes per rank"] == n  # 2(k−1)/k = 1 for k = 2
    assert priced.loc["zero1", "link bytes per rank"] == 2 * n
    assert priced.loc["zero2", "link bytes per rank"] == n
    assert priced.loc["fsdp", "link bytes per rank"] == 1.5 * n
    assert priced.loc["ddp", "seconds, test"] == pytest.approx(2 * 1e-3 + n * 1e-9)
    assert priced.loc["fsdp", "seconds, test"] == pytest.approx(12 * 1e-3 + 1.5 * n * 1e-9)


def record(strategy, world_size, collectives, held, losses, stage=None):
    """A launch's record as ``stored_sharding_run`` stores it."""
    config = {"kind": "sharding_run", "world_size": world_size,
              **runs.sharding_config(model="ConvNet", strategy=strategy)}  # fmt: skip
    return {"config": config, "result": {"stage": runs.check_strategy(strategy), "collectives": collectives,
                                         "held_bytes": held, "step_losses": losses,
                                         "step_seconds_all": [1.0, 2.0, 3.0]}}  # fmt: skip


def test_checks_of_a_launch_say_where_it_differs():
    from helpers.sharding.memory import per_rank_bytes

    expected = per_rank_bytes("ConvNet", 3, 2)
    held = [{"parameters_in_step": row["parameters"], "parameters": row["parameters"],
             "gradients": row["gradients"], "optimizer": row["optimizer"]} for row in expected]  # fmt: skip
    held[1] = {**held[1], "optimizer": held[1]["optimizer"] + 4}
    gathered = runs.gathered_bytes("ConvNet", 2)
    collectives = [["all_gather_into_tensor", gathered / 5]] * 10 + [
        ["reduce_scatter_tensor", gathered / 5]
    ] * 5
    fsdp = record("fsdp", 2, collectives, held, [2.0, 1.5, 1.2])
    checked = runs.memory_check([fsdp])
    assert checked["as computed"].tolist() == [True, False]
    traffic = runs.traffic_check([fsdp]).set_index("operation")
    assert traffic.loc["all_gather", "calls"] == 10 and traffic["as expected"].all()
    ddp = record("ddp", 2, [["all_reduce", 376_200 * 4]], held, [2.0, 1.5, 1.25])
    assert runs.traffic_check([ddp])["as expected"].tolist() == [True]
    parity = runs.loss_parity([ddp, fsdp]).set_index("strategy")
    assert parity.loc["fsdp", "largest loss difference"] == pytest.approx(0.05)
    # for reading (issue 38, 6): strategies by name and numbers as written, never "fsdp" or "0.0e+00"
    shown = runs.loss_parity_view(runs.loss_parity([ddp, fsdp]))
    assert shown["largest loss difference"].tolist() == ["0", "0.050"]
    assert [strategy for _, strategy in shown.index] == ["DDP", "FSDP"]
    assert runs.step_time_table([ddp]).iloc[0]["step median s"] == 2.0


def timed(strategy, launch, median):
    """A launch's record with three steps around ``median``."""
    config = {"kind": "sharding_run", "world_size": 2, "launch": launch,
              **runs.sharding_config(model="LinearNet", strategy=strategy)}  # fmt: skip
    return {"config": config, "result": {"step_seconds_all": [median * 0.9, median, median * 1.1]}}


def test_strategies_are_compared_with_ddp_across_launches():
    records = [timed("ddp", n, m) for n, m in enumerate([1.0, 1.1, 0.9])]
    records += [timed("fsdp", n, m) for n, m in enumerate([2.0, 2.2, 1.8])]
    table = runs.strategy_comparison(records).set_index("strategy")
    fsdp = table.loc["fsdp"]
    assert fsdp["speedup"] == pytest.approx(0.5) and fsdp["launches"] == 3
    # three launches a side: the extreme resamples pair 0.9 / 2.2 and 1.1 / 1.8
    assert (fsdp["low"], fsdp["high"]) == pytest.approx((0.9 / 2.2, 1.1 / 1.8))
    assert fsdp["verdict"] == "slower" and fsdp["step_median"] == pytest.approx(2.0)
    assert table.loc["ddp", "verdict"] == "not resolved"  # 0.82–1.22 against itself: too wide
    view = runs.strategy_view(runs.strategy_comparison(records))
    assert view.loc[("LinearNet", "FSDP"), "range of launch ratios"] == "0.41–0.61×"
    assert view.loc[("LinearNet", "FSDP"), "step time (ms)"] == "2,000"
    # DDP is the baseline: 1 by definition, not a verdict against itself, but the spread of its launches
    assert view.loc[("LinearNet", "DDP")].iloc[2:].tolist() == [
        "1", "0.82–1.22×", "the baseline (its launches against each other)"
    ]  # fmt: skip
    assert [r["config"]["launch"] for r in runs.first_launches(records)] == [0, 0]


def test_sentences_and_views_of_the_sharded_runs():
    records = [timed("ddp", n, m) for n, m in enumerate([1.0, 1.1, 0.9])]
    records += [timed("fsdp", n, m) for n, m in enumerate([2.0, 2.2, 1.8])]
    compared = runs.strategy_comparison(records)
    # FSDP takes 2.0/1.0 = 2.00 as long, from 1.8/1.1 = 1.64 to 2.2/0.9 = 2.44
    assert runs.strategy_sentence(compared, "LinearNet") == (
        "FSDP: slower, taking 2.00× as long (1.64–2.44×, 3 launches each)."
    )
    priced = runs.priced_traffic(["LinearNet"], 2, {"test": (1e-3, 1e-9)})
    # FSDP's priced extra: 10 more latencies of 1 ms and 0.5 × 48,408,880 bytes at 1 ns = 34.2 ms
    assert runs.traffic_sentence(compared, priced, "LinearNet") == (
        "In medians of launches, FSDP's step is 1,000 ms longer than DDP's, where its extra traffic, "
        "priced, costs 34 ms."
    )
    volume, milliseconds = runs.priced_view(priced)  # strategies by name in every view (issue 38, 6)
    assert volume.loc[("LinearNet", "FSDP"), "bytes per step (MB)"] == 145.2
    assert milliseconds.loc["test", ("LinearNet", "DDP")] == pytest.approx(2 + 48.41, abs=0.01)
    traffic = runs.traffic_view(runs.traffic_check([record("ddp", 2, [["all_reduce", 376_200 * 4]], [], [])]))
    assert traffic.iloc[0]["bytes per step"] == "1,504,800" and traffic.index[0][1] == "DDP"


def test_sharded_runs_say_where_they_ran_and_what_their_price_was_fitted_on():
    cpu = runs.placement(["gloo"], "cpu", 4)
    assert cpu == {"settings": {"backend": "gloo", "device": "cpu"}, "where": "4 Gloo ranks on the CPU",
                   "note": "4 Gloo ranks on the CPU"}  # fmt: skip
    fallback = runs.placement(["nccl", "gloo"], "cuda", 4)  # no GPU here: NCCL refused, said why
    assert fallback["where"] == "4 Gloo ranks on the CPU"
    assert fallback["note"].startswith("4 Gloo ranks on the CPU, not the GPU (device 'cuda' asked for")
    assert fallback["note"].endswith("but its step times are the CPU's)")
    assert runs.price_caveat("cpu", "cpu") == "" and runs.zero_work_note("cuda") == ""
    assert runs.price_caveat("cuda", "cpu").startswith(
        "The price is this machine's all-reduce fit with CUDA tensors (chapter 4); the sharded runs moved "
        "CPU tensors"
    )
    assert runs.zero_work_note("cpu").startswith("On shared cores ZeRO-1 may also save work")
