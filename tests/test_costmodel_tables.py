"""helpers.costmodel.tables: chapter 5's frames as a reader reads them."""

import pandas as pd

from helpers.costmodel import money, tables


def test_a_banded_figure_reads_central_then_lowest_to_highest():
    frame = pd.DataFrame({"x": [17.3, 2864.0, float("inf")], "x_low": [8.95, 920.0, 3.0],
                          "x_high": [50.3, 8320.0, float("inf")]})  # fmt: skip
    assert tables.banded(frame, "x").tolist()[0] == "17.3 (8.95–50.3)"
    assert tables.banded(frame, "x", whole=True).tolist()[1:] == [
        "2,864 (920–8,320)",
        "unbounded (3–unbounded)",
    ]
    assert tables.banded(frame.iloc[:1], "x", scale=1e3).tolist() == ["1.73e+04 (8.95e+03–5.03e+04)"]


def test_prices_read_with_human_columns_and_dollars_per_gpu():
    shown = tables.price_display()
    assert list(shown.columns) == ["GPU", "GPUs", "dollars", "per", "dollars per GPU", "source", "date"]
    p5 = shown.loc["AWS p5.48xlarge"]
    assert (p5["dollars"], p5["dollars per GPU"]) == ("55.04", money.money(money.exact("55.04") / 8)) == (
        "55.04", "$6.88")  # fmt: skip


def test_validation_summary_reads_with_human_columns():
    summary = pd.DataFrame({"model": ["M"], "method": ["ddp_overlap"], "points": [3], "launches": [9],
                            "mape_percent": [12.345], "mean_error_percent": [-12.345]})  # fmt: skip
    shown = tables.validation_table(summary)
    assert list(shown.columns) == ["configurations", "launches", "mean |error| (%)", "mean error (%)"]
    assert shown.loc[("M", "ddp_overlap")].tolist() == [3, 9, 12.3, -12.3]


def test_the_seeds_verdicts_read_by_model_and_batch():
    verdicts = pd.DataFrame({"model": ["M"], "global_batch": [20], "speedup": [0.5], "speedup_low": [0.4],
                             "speedup_high": [0.6], "faster": ["slower whatever the inputs"]})  # fmt: skip
    shown = tables.seed_verdict_display(verdicts)
    assert shown.loc[("M", 20)].tolist() == ["0.5 (0.4–0.6)", "slower whatever the inputs"]
