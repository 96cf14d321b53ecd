"""helpers.costmodel.tables: chapter 5's frames as a reader reads them."""

import pandas as pd

from helpers.costmodel import gpus, recommend, rule, tables


def test_a_banded_figure_reads_central_then_lowest_to_highest():
    frame = pd.DataFrame({"x": [17.3, 2864.0, float("inf")], "x_low": [8.95, 920.0, 3.0],
                          "x_high": [50.3, 8320.0, float("inf")]})  # fmt: skip
    assert tables.banded(frame, "x").tolist()[0] == "17.3 (8.95–50.3)"
    assert tables.banded(frame, "x", whole=True).tolist()[1:] == [
        "2,864 (920–8,320)",
        "unbounded (3–unbounded)",
    ]
    # written out, never in powers of ten
    assert tables.banded(frame.iloc[:1], "x", scale=1e3).tolist() == ["17,300 (8,950–50,300)"]
    assert tables.banded(frame.iloc[:1], "x", scale=1e-5).tolist() == ["0.000173 (0.0000895–0.000503)"]
    missing = pd.DataFrame({"x": [float("nan")], "x_low": [float("nan")], "x_high": [float("nan")]})
    assert tables.banded(missing, "x").tolist() == ["–"]  # no "– (–––)" placeholder (issue 38, 6)
    measured = pd.DataFrame({"x": [311.44], "x_low": [float("nan")], "x_high": [float("nan")]})
    assert tables.banded(measured, "x").tolist() == [
        "311"
    ]  # a measurement has no band: "311", not "311 (–––)"


def test_a_band_end_that_is_not_one_never_prints_as_one():
    # "dearer" beside "1.01 (1.00–1.99)" looked unsupported: the low end 1.004 gets the digit that shows it
    frame = pd.DataFrame({"x": [1.01, 1.0], "x_low": [1.004, 1.0], "x_high": [1.99, 1.0]})
    assert tables.banded(frame, "x").tolist() == ["1.01 (1.004–1.99)", "1.00 (1.00–1.00)"]
    below = pd.DataFrame({"x": [0.9996], "x_low": [0.9991], "x_high": [1.0003]})
    assert tables.banded(below, "x").tolist() == ["0.9996 (0.999–1.0003)"]  # 0.999 is not 1: kept short


def test_prices_read_in_dollars_and_cents_with_human_columns():
    shown = tables.price_display()
    assert list(shown.columns) == ["GPU", "GPUs", "price ($)", "per", "price per GPU ($)", "source"]
    assert shown.loc["AWS p5.48xlarge", ["price ($)", "price per GPU ($)"]].tolist() == ["55.04", "6.88"]
    # AWS's exact 21.957642 an hour, and 21.957642 / 8 = 2.74470525, both to the cent
    assert shown.loc["AWS p4d.24xlarge", ["price ($)", "price per GPU ($)"]].tolist() == ["21.96", "2.74"]
    assert shown.loc["A100 80 GB PCIe card, low end of new units", "price ($)"] == "8,000.00"


def test_a_source_that_rows_share_is_said_once_under_the_table():
    # the 14 AWS rows share one snapshot: one note, "[1]" on each of its rows; the first row's source is [1]
    shown = tables.price_display()
    assert shown["source"].value_counts().to_dict() == {"[1]": 14, "[2]": 1, "[3]": 1}
    notes = tables.table_notes(shown).data.splitlines()
    assert len(notes) == 3
    assert notes[0] == (
        "- [1] instances.vantage.sh snapshot in github.com/tsaol/aws-gpu (data/p\\*, g6\\*\\_instances.js), "
        "2026-08-26"
    )  # escaped: "*" and "_" are characters here, not emphasis, and "$" (note 3) is a dollar, not math
    assert "units \\$8,000-\\$15,000), 2026-03-20" in notes[2]
    # the machines table numbers its sources as the prices table does: [1] the AWS snapshot, [2] the cards
    machines = tables.machines_display()
    assert machines.loc["AWS p5.48xlarge", "source"] == "[1]"
    assert machines.loc["the seed's 4x GTX 1080 Ti workstation", "source"] == "[2]"
    assert tables.table_notes(machines).data.splitlines() == notes[:2]


def test_table_one_reads_exactly_and_in_decimals():
    exact, decimals = tables.table_one_display(exact=True), tables.table_one_display(exact=False)
    # 2×K80: 87/55 faster for twice the price per hour: Δ = (87/55) / 2 = 87/110 = 0.7909
    assert exact.loc["2×K80", ["speed-up (×)", "Δ = speed-up / price ratio"]].tolist() == ["87/55", "87/110"]
    assert decimals.loc["2×K80", ["$ per epoch", "Δ = speed-up / price ratio"]].tolist() == [
        "0.01375",
        "0.7909",
    ]


def test_layer_costs_read_with_separators():
    costs = gpus.layer_costs("LinearNet").assign(model="LinearNet")
    row = tables.layer_cost_display(costs).loc[("LinearNet", "1: Linear", "forward")]
    # 12,000 × 1,000 multiply-adds (2 FLOPs each) and 1,000 bias adds; the weights and biases once per step
    assert row[["FLOPs per sample", "of which multiply-add FLOPs", "bytes per step, any batch"]].tolist() == [
        "24,001,000", "24,000,000", "48,004,000"]  # fmt: skip


def test_assumptions_read_with_host_time_in_microseconds():
    shown = tables.assumptions_display().loc["host time per eager PyTorch op"]
    assert shown[["low", "central", "high", "unit"]].tolist() == ["43.7", "66.6", "114", "µs"]


def test_inputs_read_to_three_digits_and_an_unbounded_rate_said_so():
    inputs = pd.DataFrame({"input": ["a", "b", "c"], "value": [0.000012345, float("inf"), 123456.7],
                           "from": ["x", "y", "z"]})  # fmt: skip
    assert tables.inputs_display(inputs)["value"].tolist() == ["1.23e-05", "unbounded", "123,457"]


def test_validation_summary_reads_with_human_columns():
    summary = pd.DataFrame({"model": ["M"], "method": ["ddp_overlap"], "configurations": [2],
                            "points": [3], "launches": [9], "mape_percent": [12.345],
                            "mean_error_percent": [-12.345]})  # fmt: skip
    (shown,) = tables.validation_tables(summary)  # no spread columns: one table
    assert list(shown.columns) == [
        "configs", "measured", "launches", "MAPE %", "mean signed error %"
    ]  # fmt: skip
    assert shown.loc[("M", "DDP with overlap")].tolist() == [2, 3, 9, 12.3, -12.3]  # methods by name
    spread = {"predictions_above": [3], "within_measured_range": [0], "measured_range_percent": [4.56],
              "link_band_percent": [2.54]}  # fmt: skip
    errors, against = tables.validation_tables(summary.assign(**spread))
    assert errors.equals(shown)
    assert list(against.columns) == [
        "predictions above",
        "inside measured range",
        "measured range, % of median",
        "link-fit shift, max %",
    ]
    assert against.loc[("M", "DDP with overlap")].tolist() == [3, 0, 4.6, 2.5]


def test_the_seeds_verdicts_read_by_model_and_batch():
    verdicts = pd.DataFrame({"model": ["M"], "global_batch": [20], "speedup": [0.5], "speedup_low": [0.4],
                             "speedup_high": [0.6], "faster": ["slower whatever the inputs"]})  # fmt: skip
    shown = tables.seed_verdict_display(verdicts)
    assert shown.loc[("M", 20)].tolist() == ["0.500 (0.400–0.600)", "slower"]
    assert (
        tables.table_notes(shown).data
        == "- A verdict without a note (n) holds whatever the inputs: over the whole band."
    )


def test_a_verdict_that_depends_reads_as_a_numbered_note_under_its_table():
    """Issue 38, 1: a "depends on …: measure it with …" verdict repeated per row made rows 500 px tall;
    each distinct reason is numbered once across the columns, and said whole under the table."""
    first, second = "depends on the a: measure it with x", "depends on b and c together: measure them with y"
    table = pd.DataFrame({
        "time": [first, "faster whatever the inputs", second, first],
        "dollars": ["dearer whatever the inputs", second, first, "no price to compare"],
    })  # fmt: skip
    coded = tables.depends_coded(table, ["time", "dollars"])
    # a verdict over the whole band loses its "whatever the inputs", said once under the table
    assert coded["time"].tolist() == ["depends (1)", "faster", "depends (2)", "depends (1)"]
    assert coded["dollars"].tolist() == ["dearer", "depends (2)", "depends (1)", "no price to compare"]
    whole = "- A verdict without a note (n) holds whatever the inputs: over the whole band."
    assert tables.table_notes(coded).data == f"{whole}\n- (1) {first}.\n- (2) {second}."
    assert table["time"].iloc[0] == first  # the table given is left as it was


def test_the_conditions_read_without_unbounded_bands_for_one_bucket_models():
    """Both book models make one DDP bucket at 25 MiB: the table shows no b*_hide column and no
    "(unbounded–unbounded)", but the all-reduce after backward beside the compute per GPU at the chapter's
    batch; a model of several buckets brings b*_hide back, and a one-bucket row beside it reads "none"."""
    conditions = rule.condition_table(("LinearNet", "ConvNet"), ("AWS p5.48xlarge",), batch=100)
    shown = tables.condition_display(conditions).set_index(["model", "machine"])
    assert list(shown.columns) == [  # 8 GPUs and one bucket in every row: said in the headers
        "all-reduce after backward, 1 bucket (ms)",
        "step without the all-reduce, batch 100, at most 13 per GPU (ms)",
        r"\(b^*_{\text{floor}}\) (samples per GPU)", "global batch needed on 8 GPUs", "2,700 clips enough?",
    ]  # fmt: skip
    assert not shown.apply(lambda column: column.astype(str).str.contains("unbounded")).any().any()
    p5 = shown.loc[("ConvNet", "AWS p5.48xlarge")]
    row = conditions.set_index("model").loc["ConvNet"]
    assert p5["all-reduce after backward, 1 bucket (ms)"].startswith(f"{row['tail_seconds'] * 1e3:.3g} (")
    step = p5["step without the all-reduce, batch 100, at most 13 per GPU (ms)"]  # shares of 13 and 12
    assert step.startswith(f"{row['compute_seconds'] * 1e3:.3g} (")
    assert p5["global batch needed on 8 GPUs"].startswith(f"{int(row['floor_global_batch']):,} (")
    assert p5["2,700 clips enough?"] == "yes"
    # LinearNet: what the training set's answer depends on, numbered once per distinct reason
    wide = tables.condition_display(rule.condition_table(("LinearNet",), recommend.EIGHT_GPU_MACHINES))
    answers = wide["2,700 clips enough?"].tolist()
    coded = sorted({answer for answer in answers if answer.startswith("depends")})
    assert set(answers) - set(coded) <= {"yes", "no"} and coded[0] == "depends (1)"
    notes = tables.table_notes(wide).data.splitlines()
    numbered = [note for note in notes if note.startswith("- (")]
    assert [note.split(")")[0] + ")" for note in numbered] == [f"- ({n})" for n in range(1, len(coded) + 1)]
    assert all(" depends on " in note for note in numbered)
    # every note names its inputs, even where none decides alone, and says what measures them
    assert all(": measure " in note and "make study PROFILE=gpu" in note for note in numbered)
    mixed = pd.concat([
        conditions.iloc[:1],
        rule.condition_table(("LinearNet",), ("AWS g6.48xlarge",), bucket_cap_mb=0.25, batch=100),
    ])  # fmt: skip
    hide = tables.condition_display(mixed)[r"\(b^*_{\text{hide}}\) (samples per GPU)"].tolist()
    assert hide[0] == "none: one bucket" and hide[1].startswith("1 (")
    bare = tables.condition_display(rule.condition_table(("ConvNet",), ("AWS p5.48xlarge",)))
    assert not any(column.startswith("each GPU's step") for column in bare.columns)
