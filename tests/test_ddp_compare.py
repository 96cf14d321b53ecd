"""helpers.ddp_compare: DataParallel and Lightning set against the DDP launch of their own round."""

import pandas as pd

from helpers import ddp_compare, ddp_placement, lightning_ddp


def test_dataparallel_is_set_against_the_ddp_launch_of_its_own_round(monkeypatch):
    timed, launched = [], []

    def timing(store, name, train_set, **options):
        timed.append((name, options["seed"]))
        return {"result": {"step_seconds_all": [2.0] * 5}}

    def run(store, ranks, launch_number, **settings):
        launched.append((settings["model"], ranks, launch_number))
        return {"result": {"step_seconds_all": [1.0] * 5}}

    monkeypatch.setattr(ddp_compare, "stored_dataparallel_timing", timing)
    monkeypatch.setattr(ddp_compare, "stored_ddp_run", run)
    ddp_compare.time_dataparallel(None, ["LinearNet"], [], ["cpu"], 8, 2, number=1)
    assert timed == [("LinearNet", 1)]  # round 1's timing, as ddp.run_sweeps' `alongside` makes it
    table = ddp_compare.dataparallel_against_ddp(None, ["LinearNet"], [], ["cpu"] * 2, 8, {}, 2, 3, 2)
    # timing n against launch n of the same settings: the sweep's integer launch numbers, not launches of
    # its own
    assert launched == [("LinearNet", 2, 0), ("LinearNet", 2, 1), ("LinearNet", 2, 2)]
    assert timed[1:] == [("LinearNet", 0), ("LinearNet", 1), ("LinearNet", 2)]
    assert table.loc["LinearNet", "DDP against DataParallel"] == "faster, 2.00× (2.00–2.00×, 3 rounds each)"
    assert table.loc["LinearNet", ["DataParallel step (ms)", "DDP step (ms)"]].tolist() == ["2,000", "1,000"]
    assert ddp_compare.dataparallel_answer(table) == "`LinearNet` faster, 2.00×"  # the interval: the table's


def test_a_round_times_dataparallel_then_launches_lightning_where_it_is_asked_for(monkeypatch):
    done = []
    monkeypatch.setattr(ddp_compare, "time_dataparallel", lambda *a: done.append(("DataParallel", a[-1])))
    monkeypatch.setattr(lightning_ddp, "available", lambda: True)
    monkeypatch.setattr(lightning_ddp, "launch_round", lambda *a: done.append(("Lightning", a[-1])))
    ddp_compare.chapter_rounds(None, ["LinearNet"], [], ["cpu"], 8, 2, ["LinearNet"], [1, 2], {})(1)
    ddp_compare.chapter_rounds(None, ["LinearNet"], [], ["cpu"], 8, 2, [], [1, 2], {})(2)
    assert done == [("DataParallel", 1), ("Lightning", 1), ("DataParallel", 2)]  # no Lightning asked for


def test_the_answer_lists_each_model_s_verdict():
    table = pd.DataFrame(index=pd.Index(["LinearNet", "ConvNet"], name="model"))
    table.attrs["changes"] = {
        "LinearNet": {"verdict": "faster", "speedup": 2.0, "low": 1.9, "high": 2.1, "launches": (3, 3)},
        "ConvNet": {"verdict": "not resolved", "speedup": 1.02, "low": 0.9, "high": 1.2, "launches": (3, 3)},
    }
    assert ddp_compare.dataparallel_answer(table) == (
        "`LinearNet` faster, 2.00×; `ConvNet` not resolved, 1.02× (0.90–1.20×)"
    )


def test_dataparallel_against_ddp_is_read_for_where_both_ran():
    one_gpu = ddp_placement.Placement("gloo", "cuda", 4, gpus=1, cores=16, threads=4, gpu_name="NVIDIA H200")
    said = ddp_compare.dataparallel_reading(["cuda:0"] * 4, one_gpu)
    assert said == (
        "Here DataParallel's 4 replicas run in one process on one NVIDIA H200, and DDP's 4 Gloo ranks take "
        "turns on the same GPU, every gradient bucket staged through host memory: read this as the two "
        "methods' overheads on a shared GPU, not as a ranking for 4 GPUs."
    )
    assert "cores" not in said and "CPU" not in said
    cpu = ddp_placement.Placement("gloo", "cpu", 2, gpus=0, cores=2, threads=1)
    assert ddp_compare.dataparallel_reading(["cpu"] * 2, cpu) == (
        "It has all the threads while each DDP rank has its share: read this as the two methods' overheads "
        "on the same 2 cores, not as a ranking for GPUs."
    )
    own = ddp_placement.Placement("nccl", "cuda", 4, gpus=4, cores=64, threads=16, gpu_name="NVIDIA H100")
    assert ddp_compare.dataparallel_reading([f"cuda:{i}" for i in range(4)], own) == (
        "Each of the 4 replicas and each DDP rank has a GPU of its own."
    )


def test_a_small_resolved_difference_in_the_answer_is_said_to_be_below_what_matters():
    table = pd.DataFrame(
        {
            "DDP against DataParallel": [
                "slower by under 10 %, taking 1.022× as long (1.003–1.040×, 3 rounds each)"
            ]
        },
        index=pd.Index(["ConvNet"], name="model"),
    )
    table.attrs["changes"] = {
        "ConvNet": {"verdict": "slower", "speedup": 0.978, "low": 0.962, "high": 0.997, "launches": (3, 3)}
    }
    assert ddp_compare.dataparallel_answer(table) == ("`ConvNet` slower by under 10 %, taking 1.02× as long")


def test_lightning_s_table_note_and_title_as_chapter_3_shows_them():
    frameworks = {
        "note": "Compared at 1 rank(s), 3 launches each. Skipped 4 rank(s): Lightning runs one rank per GPU: "
        "4 ranks per node asked for, 1 GPU usable.",
        "ranks": 1,
        "table": pd.DataFrame(
            {"model": ["LinearNet"], "framework": ["by hand"], "step time (s)": ["0.00537"]}
        ),
    }
    # the chapter's own words in the singular or plural; the launcher's reason it quotes as it is
    assert ddp_compare.framework_note(frameworks) == (
        "Compared at 1 rank, 3 launches each. Skipped 4 ranks: Lightning runs one rank per GPU: 4 ranks per "
        "node asked for, 1 GPU usable."
    )
    assert ddp_compare.framework_title("gloo", frameworks) == "DDP (gloo, 1 rank): by hand, Lightning"
    once = {**frameworks, "note": "Compared at 2 rank(s), 1 launches each."}
    assert ddp_compare.framework_note(once) == "Compared at 2 ranks, 1 launch each."
    shown = ddp_compare.framework_table(frameworks)
    assert shown.loc[("LinearNet", "by hand"), "step time (ms)"] == "5.37"
