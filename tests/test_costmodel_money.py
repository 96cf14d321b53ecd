"""helpers.costmodel.money: the seed's arithmetic exactly, Table I, dollars of our runs."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from helpers.costmodel import money

# ----- money ------------------------------------------------------------------------------------------


def test_exact_reads_decimals_as_typed():
    assert money.exact("1.46") == Fraction(73, 50)
    assert money.exact(0.45) == Fraction(9, 20)  # not the binary double nearest to 0.45
    assert money.exact(8000) == 8000
    with pytest.raises(ValueError):
        money.exact(float("nan"))


def test_break_even_seed_case_exactly():
    result = money.break_even(8000, "1.50")
    assert result.hours == Fraction(16000, 3)  # 5,333 1/3 h
    assert result.years == Fraction(8, 3)  # 2.666… full-time years of 2,000 h
    assert money.exactly(result.hours, 1, " h") == "5,333.3 h (exactly 16,000/3)"
    assert money.decimal_expansion(result.years) == "2.666…"


def test_break_even_with_performance_adjustment_exactly():
    result = money.break_even(8000, "1.50", "-0.3")
    assert result.effective_price == 5600
    assert result.hours == Fraction(11200, 3)  # 3,733 1/3 h
    assert result.years == Fraction(28, 15)  # 1.866… years
    line = money.describe_break_even(result)
    assert (
        line == "$8,000.00 adjusted by -30% to $5,600.00 at $1.50/h → 3,733.3 h (exactly 11,200/3) = 1.87 "
        "years (exactly 28/15) of 2,000 h"
    )


def test_rounding_is_half_up_in_decimal_and_a_fraction_shows_only_where_short():
    # a binary float rounds 2.675 to 2.67 and 1/8 to 0.12; the exact value rounds half up
    assert money.rounded(Fraction(107, 40), 2) == "2.68" and money.rounded(Fraction(1, 8), 2) == "0.13"
    assert money.rounded(Fraction(16000, 3), 1) == "5,333.3"
    assert money.exactly(Fraction(1, 16), 4) == "0.0625"  # ends within its places: exact, no fraction
    assert money.exactly(Fraction(1000, 367), 1, " h") == "2.7 h"  # a long fraction would say nothing


@pytest.mark.parametrize(
    "arguments", [(0, "1.5"), (8000, 0), (8000, "1.5", -1), (8000, "1.5", 0, 0)], ids=str
)
def test_break_even_refuses_impossible_inputs(arguments):
    with pytest.raises(ValueError):
        money.break_even(*arguments)


def test_number_formats():
    assert money.decimal_expansion(Fraction(3, 2)) == "1.5"
    assert money.decimal_expansion(Fraction(16000, 3), 2) == "5,333.33…"
    assert money.fraction_text(Fraction(-7, 2)) == "-7/2" and money.fraction_text(Fraction(2000)) == "2,000"
    # a decimal that ends within its places needs no fraction beside it
    assert (
        money.exactly(Fraction(3, 2), 2) == "1.5" and money.exactly(Fraction(2, 3), 2) == "0.67 (exactly 2/3)"
    )
    assert money.money(Fraction(3, 2)) == "$1.50"
    assert money.money("27.44705") == "$27.44705"  # a price as quoted, never cut to "$27.4470…"
    assert money.money(Fraction(8, 3)) == "$2.6666…"


def test_dollars_per_epoch_is_exact():
    assert money.dollars_per_epoch("87", "0.45") == Fraction(87, 8000)  # $0.010875
    assert money.dollars_per_epoch(3600, 2) == 2


def test_table_one_reproduces_the_seed_exactly():
    table = money.table_one(as_float=False).set_index("setup")
    assert list(table["dollars_per_epoch"]) == [Fraction(87, 8000), Fraction(11, 800), Fraction(73, 3750)]
    assert list(table["speedup"]) == [1, Fraction(87, 55), Fraction(29, 16)]
    assert list(table["price_ratio"]) == [1, 2, Fraction(146, 45)]
    assert list(table["delta"]) == [1, Fraction(87, 110), Fraction(1305, 2336)]
    assert all(table["delta"] * table["cost_per_epoch_ratio"] == 1)  # Δ = 1 / cost-per-epoch ratio
    floats = money.table_one()
    assert floats.loc[2, "dollars_per_epoch"] == pytest.approx(0.0194666667)


def test_table_one_needs_its_baseline():
    with pytest.raises(ValueError, match="baseline"):
        money.table_one(baseline="V100")


def test_to_target():
    cost = money.to_target(10, "87", "0.45")
    assert cost == {"seconds": 870, "hours": Fraction(29, 120), "dollars": Fraction(87, 800)}


# ----- our runs, curves and calibration inputs from the store -------------------------------------------


def ddp_record(model: str, world_size: int, epoch_seconds: float, **config) -> dict:
    return {
        "kind": "ddp_run", "key": f"{model}{world_size}{config}",
        "config": {"model": model, "world_size": world_size, "bucket_cap_mb": 25, "compression": None,
                   **config},
        "result": {"epoch_seconds": epoch_seconds, "history": [{"epoch": 1, "train_loss": 2.0}]},
    }  # fmt: skip


def test_measured_run_costs_price_each_rank_and_compare_with_one():
    records = [
        ddp_record("ConvNet", 1, 36.0), ddp_record("ConvNet", 2, 20.0),
        ddp_record("ConvNet", 2, 99.0, bucket_cap_mb=1),
        ddp_record("LinearNet", 2, 5.0),  # no one-rank run to compare with: left out
    ]  # fmt: skip
    costs = money.measured_run_costs(records, "3.60", bucket_cap_mb=25)
    assert costs["setup"].tolist() == ["ConvNet, 1 rank", "ConvNet, 2 ranks"]
    assert costs["ranks"].tolist() == [1, 2]
    assert costs["dollars_per_epoch"].tolist() == [0.036, 0.04]  # 36 s at $3.60/h; 20 s at $7.20/h
    assert costs["speedup"].tolist() == [1.0, 1.8] and costs["delta"].tolist() == [1.0, 0.9]


def test_epochs_to_accuracy():
    history = [{"epoch": 1, "test_accuracy": 0.3}, {"epoch": 2, "test_accuracy": 0.61}, {"epoch": 3}]
    assert money.epochs_to_accuracy(history, 0.6) == 2
    assert money.epochs_to_accuracy(history, 0.9) is None


def test_the_seed_quoted_beside_its_exact_figures():
    table = money.seed_break_even_table("8000", "1.50").set_index("case")
    assert table.loc["standard", "the seed says"] == "~5,250 hours … ~2.5 years"
    assert table.loc["standard", "hours"] == "5,333.3 (exactly 16,000/3)"
    assert table.loc["standard", "years"] == "2.67 (exactly 8/3)"
    assert table.loc["adjusted by −30 %", "the seed says"] == "~3,750 hours … ~1.75 years"
    assert table.loc["adjusted by −30 %", "hours"] == "3,733.3 (exactly 11,200/3)"
    assert table.loc["adjusted by −30 %", "years"] == "1.87 (exactly 28/15)"


def test_one_dated_price_table():
    table = money.price_table()
    assert table["date"].str.len().min() >= 4 and table["source"].str.len().min() > 10
    assert money.hourly_price_per_gpu("H100 SXM 80 GB") == Fraction("55.04") / 8
    assert money.hourly_price_per_gpu("A100 SXM 80 GB") == Fraction("27.44705") / 8  # p4de, not p4d's 40 GB
    assert money.hourly_price_per_gpu("GTX 1080 Ti") is None  # a card to buy, not rent
    assert table.set_index("offer").loc["AWS p3.8xlarge", "dollars_per_gpu"] == Fraction("3.06")


def test_an_epoch_measured_on_fewer_clips_is_scaled_by_its_steps():
    # chapter 3 timed 8 steps of 50 on 400 clips; the full split takes 54: 6.75 times as long
    assert money.scale_epoch("10", measured_samples=400, samples=2700, batch=50) == Fraction(135, 2)
    assert money.scale_epoch(3, measured_samples=100, samples=101, batch=50) == Fraction(9, 2)


def test_the_value_of_an_hour_at_which_more_gpus_cost_less_in_total():
    """Issue 37's example: 20 ConvNet epochs cost 0.0179 dollars over 9.34 s on one H100 and 0.0190 over
    1.25 s on eight: eight cost less in total above 0.0011 / (8.09 / 3600) dollars an hour (about 0.49)."""
    hour = Fraction(3600)
    value = money.break_even_hour_value(
        Fraction("0.0190"), Fraction("1.25") / hour, Fraction("0.0179"), Fraction("9.34") / hour
    )
    assert value == Fraction("0.0011") * 3600 / Fraction("8.09")
    assert money.break_even_hour_value(1, 1, 2, 3) == 0  # cheaper and faster: at any value
    assert money.break_even_hour_value(3, 3, 2, 3) == math.inf  # as slow and dearer: at none
    assert money.break_even_hour_value(1, 4, 2, 3) == math.inf  # slower, cheaper: dearer once time counts
    # the verdict over a band of break-evens: no dearer exactly where the value reaches the break-even
    assert money.hour_value_verdict(1, 0.4, 1) == "no dearer in total whatever the inputs"
    assert money.hour_value_verdict(0.39, 0.4, 1) == "dearer in total whatever the inputs"
    assert money.hour_value_verdict(0.5, 0.4, 1) == "depends on the inputs"
    assert money.hour_value_verdict(1e9, 0.4, math.inf) == "depends on the inputs"
