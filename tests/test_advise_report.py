"""helpers.advise.report: the tables chapter 7 shows count as chapter 5 does; its sentences are built from
how many held-out points there are and from the machine that measured them."""

from dataclasses import replace

from helpers.advise import counting, report
from helpers.costmodel import tables
from helpers.models import build_model
from helpers.stats import significant


def test_host_ops_per_step_are_chapter_5_s_layer_kernels_loss_and_adam():
    """LinearNet: 21 layer kernels forward and backward, 4 for log-softmax and NLL, 8 for foreach Adam as
    it runs (7 list-wide kernels and the step counters' add_): 33 ops, the number chapter 5's roofline
    charges its host time for."""
    counted = {name: counting.count_book_model(name) for name in ("LinearNet", "ConvNet")}
    table = report.model_table(counted)
    kernels = int(counted["LinearNet"].layer_table()["kernels"].sum())
    assert kernels == 21
    assert table.loc["LinearNet", "host ops per step (layers, loss, optimizer)"] == 21 + 4 + 8
    assert table.loc["LinearNet", "parameters"] == "12,102,220"
    assert table.loc["ConvNet", "parameters"] == "376,200"


def test_convnet_s_host_ops_are_chapter_5_s_hand_count_and_the_tool_counts_aten_ops():
    """ConvNet by chapter 5's hand count: 33 layer kernels (a convolution's backward counted as its
    kernels) + 4 + 8 = 45. Counted as any model, its 28 ATen ops (each convolution's backward one op)
    + 4 + 8 = 40: the two conventions the chapter's table note names."""
    book = counting.count_book_model("ConvNet")
    tool = counting.count(build_model("ConvNet"), (1, 12_000), label="ConvNet as a module")
    column = "host ops per step (layers, loss, optimizer)"
    assert report.model_table({"ConvNet": book}).loc["ConvNet", column] == 33 + 4 + 8
    assert report.model_table({"counted": tool}).loc["counted", column] == 28 + 4 + 8


def test_the_verdicts_of_a_model_are_a_table_of_its_multi_gpu_machines():
    """Issue 38, 2: 7.3's verdicts, once an 832-word paragraph, are a table per model whose cells are the
    verdict sentences' own figures and verdicts, a row per multi-GPU machine; the basis only where it
    differs between machines."""
    from helpers.advise import predict
    from helpers.costmodel.prose import short_verdict

    found = predict.advise(
        counting.count_book_model("ConvNet"), 16, [1, 4]
    )  # 4 x L4 at 4 per GPU: it depends
    view = report.verdict_view(found)
    notes = tables.table_notes(view).data.splitlines()
    several = found.machines[found.machines["gpus"] > 1]
    assert view.index.name == "ConvNet" and len(view) == len(several) == len(found.verdicts)
    for (machine, shown), row, sentence in zip(
        view.iterrows(), several.itertuples(), found.verdicts, strict=True
    ):
        assert machine == f"{row.machine}: {row.gpus} × {row.gpu}"
        assert sentence.startswith(f"{row.gpus} × {row.gpu} ({row.machine}): {row.speedup:#.3g}× ")
        assert shown["speed-up (×)"].startswith(f"{row.speedup:.3g}")
        assert f"— {short_verdict(row.faster)}; {short_verdict(row.dollars)}" in sentence
        for verdict, code in ((row.faster, shown["time verdict"]), (row.dollars, shown["dollar verdict"])):
            # a verdict over the whole band reads whole; "depends (n)" points to its reason under the table
            assert code == verdict.removesuffix(" whatever the inputs") or (
                f"- {code.removeprefix('depends ')} {verdict}." in notes
            )
    assert any(code.startswith("depends (") for code in view["time verdict"])  # the test reaches the notes
    assert all(view[c].str.len().max() <= 30 for c in ("time verdict", "dollar verdict"))  # a line each
    assert "basis" not in view  # every machine priced by the roofline here
    mixed = found.machines.assign(basis=["measured"] + ["roofline"] * (len(found.machines) - 1))
    assert "basis" in report.verdict_view(replace(found, machines=mixed))
    # the lead-in says what the figures rest on, naming the basis column only where a table has one
    first_multi = found.machines["gpus"].gt(1).cumsum().eq(1) & found.machines["gpus"].gt(1)
    split = found.machines.assign(basis=first_multi.map({True: "measured", False: "roofline"}))
    measured = found.machines.assign(basis="measured")
    assert report.basis_note({"a": found}) == "Every number in these tables rests on chapter 5's roofline."
    assert report.basis_note({"a": found, "b": replace(found, machines=split)}).endswith(
        "which the basis column names."
    )
    assert report.basis_note({"a": replace(found, machines=measured)}) == (
        "Every number in these tables rests on measured 1-GPU steps, modelled all-reduce."
    )


def test_where_the_all_reduce_stands_is_said_beside_the_verdict_tables():
    """The verdict table leaves out what the old sentences said per machine: one bucket, so the all-reduce
    follows backward, and how long it takes, from the fastest machine's to the slowest's."""
    from helpers.advise import predict

    advice = {
        name: predict.advise(counting.count_book_model(name), 96, [1, 4]) for name in ("LinearNet", "ConvNet")
    }
    tails = {name: found.conditions["tail_seconds"] * 1e6 for name, found in advice.items()}
    assert report.bucket_note(advice) == (
        "The gradients of `LinearNet` and `ConvNet` each fit one DDP bucket at the default 25 MiB cap, so on "
        "every machine the all-reduce follows backward, never hidden (`LinearNet` "
        f"{significant(tails['LinearNet'].min())}–{significant(tails['LinearNet'].max())} µs, `ConvNet` "
        f"{significant(tails['ConvNet'].min())}–{significant(tails['ConvNet'].max())} µs a step across the "
        "machines)."
    )
    split = advice["ConvNet"].conditions.assign(buckets=2)
    several = {"ConvNet": replace(advice["ConvNet"], conditions=split)}
    assert report.bucket_note(several) == (
        "`ConvNet`'s gradients split into several buckets, all but the last of which can hide behind "
        "backward."
    )
