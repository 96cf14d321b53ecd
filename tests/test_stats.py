"""helpers.stats: a median with its spread, and verdicts that say only what their interval supports."""

import math

import pytest

from helpers import stats


def test_spread_of_five_repeats():
    result = stats.spread([1.0, 1.2, 1.1, 0.9, 3.0])
    assert (result.median, result.low, result.high, result.count) == (1.1, 0.9, 3.0, 5)
    assert (result.q1, result.q3) == (1.0, 1.2)
    assert result.text() == "1.1 s (0.9–3, 5 runs)"
    assert result.text(unit="ms", scale=1e3) == "1.1e+03 ms (900–3e+03, 5 runs)"
    assert result.text(repeats="steps") == "1.1 s (0.9–3, 5 steps)"
    with pytest.raises(ValueError, match="at least one value"):
        stats.spread([])


def test_a_verdict_needs_its_whole_interval():
    assert stats.verdict(1.01, 1.3) == "faster" and stats.verdict(0.7, 0.99) == "slower"
    # inside ±10 % of 1: close enough to exclude a difference that matters (1/1.1 = 0.909…)
    assert stats.verdict(0.91, 1.09) == "no measurable difference"
    assert stats.verdict(0.90, 1.05) == "not resolved"  # 0.90 < 0.909: a 10 % slowdown is not excluded
    assert stats.verdict(0.74, 1.90) == "not resolved"  # the interval of one launch against itself


def test_speedup_within_one_process_pairs_the_extremes():
    base = [10, 10.5, 11, 9.5, 10]
    assert stats.speedup(base, [5, 5.2, 4.9, 5.1, 5])["verdict"] == "faster"
    assert stats.speedup(base, [20, 21, 19, 20, 22])["verdict"] == "slower"
    overlapping = stats.speedup(base, [9.8, 10.2, 10, 11.5, 9.6])
    assert overlapping["low"] == pytest.approx(9.5 / 11.5) and overlapping["high"] == pytest.approx(11 / 9.6)
    assert overlapping["verdict"] == "not resolved"  # 0.83–1.15: a 10 % change either way is not excluded
    assert stats.describe_speedup(overlapping) == "not resolved, 1.00× (0.83–1.15×)"
    tight = stats.speedup([10, 10.1, 10.2], [10.05, 10.1, 10.15])
    assert tight["verdict"] == "no measurable difference"
    assert stats.describe_speedup(stats.speedup(base, [5] * 5)) == "faster, 2.00× (1.90–2.20×)"


def test_speedup_across_launches_bootstraps_the_launch_medians():
    # Three launches each; their median steps are 1.0, 1.2, 1.1 s and 0.5, 0.6, 0.55 s. The ratio of the
    # medians of the launch medians is 1.1 / 0.55 = 2.0. With three launches a resampled median is one of
    # the three, each extreme with probability 7/27 > 2.5 %, so the 95 % interval runs from the slowest
    # candidate against the fastest baseline, 1.0 / 0.6, to the reverse, 1.2 / 0.5.
    baseline = [[1.0, 0.9, 1.1], [1.2, 1.3, 1.1], [1.1, 1.1, 1.0]]
    candidate = [[0.5, 0.4, 0.6], [0.6, 0.7, 0.5], [0.55, 0.5, 0.6]]
    result = stats.launch_speedup(baseline, candidate)
    assert result["speedup"] == pytest.approx(2.0)
    assert (result["low"], result["high"]) == (pytest.approx(1.0 / 0.6), pytest.approx(1.2 / 0.5))
    assert result["verdict"] == "faster" and result["launches"] == (3, 3)
    assert stats.describe_speedup(result) == "faster, 2.00× (1.67–2.40×, 3 launches each)"
    assert stats.launch_speedup(baseline, candidate) == result  # seeded: the same interval every time


def test_fewer_than_three_launches_resolve_nothing():
    two = stats.launch_speedup([[1.0], [1.1]], [[0.5], [0.55]])
    assert two["speedup"] == pytest.approx(1.05 / 0.525) and two["verdict"] == "not resolved"
    assert stats.describe_speedup(two).endswith("(1.82–2.20×, 2 launches each)")
    one = stats.launch_speedup([[1.0]], [[0.5]])
    assert stats.describe_speedup(one, unit="round") == "not resolved, 2.00× (2.00–2.00×, 1 round each)"
    uneven = stats.launch_speedup([[1.0]], [[0.5], [0.5]])
    assert stats.describe_speedup(uneven).endswith(", 1 and 2 launches)")
    with pytest.raises(ValueError, match="at least one launch on each side"):
        stats.launch_speedup([], [[1.0]])


def test_an_interval_wholly_below_one_never_prints_as_touching_it():
    """Chapter 3's ConvNet against DataParallel: slower, its interval ends at 0.997, which two decimals
    would print as 1.00, against the book's rule that a verdict needs the interval on one side of 1. Slower,
    it is said as the time taken: 1/0.978 = 1.0225 as long, 1/0.997 = 1.0030 to 1/0.962 = 1.0395."""
    near = {"verdict": "slower", "speedup": 0.978, "low": 0.962, "high": 0.997, "launches": (3, 3)}
    assert (
        stats.describe_speedup(near, unit="round")
        == "slower by under 10 %, taking 1.022× as long (1.003–1.040×, 3 rounds each)"
    )
    unresolved = {**near, "verdict": "not resolved", "high": 1.004}
    assert (
        stats.describe_speedup(unresolved, unit="round")
        == "not resolved, taking 1.02× as long (1.00–1.04×, 3 rounds each)"
    )


def test_an_interval_over_three_launches_a_side_is_named_the_range_it_is():
    assert stats.interval_label([(3, 3), (3, 3)]) == "range of launch ratios"
    assert stats.interval_label([(3, 3), (5, 5)]) == "95 % interval"
    assert stats.interval_label([]) == "95 % interval"
    # and it is that range: the 9 ratios of 3 launches against 3 bound the bootstrap's 95 % interval
    base, new = [[2.0], [2.1], [1.9]], [[1.0], [1.1], [0.9]]
    found = stats.launch_speedup(base, new)
    assert (found["low"], found["high"]) == pytest.approx((1.9 / 1.1, 2.1 / 0.9))


def test_a_share_is_written_in_whole_per_cent():
    assert stats.whole_percent(0.2874) == "29 %" and stats.whole_percent(1.0) == "100 %"


def test_a_difference_on_one_side_of_one_but_inside_what_matters_says_both():
    """Chapter 6's LinearNet weak scaling, 0.95–0.97×: wholly below 1 (slower) and inside ±10 % of 1."""
    small = {"verdict": "slower", "speedup": 0.96, "low": 0.95, "high": 0.97, "launches": None}
    # as the time taken: 1/0.96 = 1.042, from 1/0.97 = 1.031 to 1/0.95 = 1.053
    assert stats.describe_speedup(small) == "slower by under 10 %, taking 1.04× as long (1.03–1.05×)"
    edge = {**small, "low": 1 / 1.1 - 1e-9}  # just outside ±10 %: a difference that may matter
    assert stats.describe_speedup(edge).startswith("slower, taking 1.04× as long (1.03–1.10×)")
    faster = {"verdict": "faster", "speedup": 1.02, "low": 1.01, "high": 1.05, "launches": None}
    assert stats.describe_speedup(faster).startswith("faster by under 10 %, 1.02×")
    assert stats.verdict(0.95, 0.97) == "slower" and stats.verdict(0.95, 1.05) == "no measurable difference"


def test_a_verdict_in_a_table_says_what_its_sentence_says():
    assert stats.verdict_words("slower", 0.95, 0.97) == "slower by under 10 %"
    assert stats.verdict_words("slower", 0.5, 0.97) == "slower"
    assert stats.verdict_words("not resolved", 0.95, 1.2) == "not resolved"


def test_batches_with_one_word_read_as_a_run():
    runs = stats.batch_runs([(10, "depends"), (20, "faster"), (30, "faster"), (50, "slower"), (70, "faster")])
    assert runs == [("depends", 10, 10), ("faster", 20, 30), ("slower", 50, 50), ("faster", 70, 70)]
    assert stats.run_phrases(runs[:2]) == ["depends at batch 10", "faster from batch 20 to 30"]
    assert stats.batch_runs([]) == []


def test_an_interval_end_near_the_edge_of_what_matters_gets_a_third_digit():
    # 0.9003 at two decimals prints 0.90, like the edge 1 − 10 %; at three, 0.900
    assert stats.interval_digits("not resolved", 0.8748, 0.9003) == 3
    # the gpu edition's ConvNet at batch 50, said as the time taken: 1/0.8891 = 1.125 as long, its ends
    # 1/0.9003 = 1.111 and 1/0.8748 = 1.143 print apart from the edge 1.10 at two decimals
    slower = {"verdict": "slower", "speedup": 0.8891, "low": 0.8748, "high": 0.9003}
    assert stats.describe_speedup(slower) == "slower, taking 1.12× as long (1.11–1.14×)"
    # 0.910 lies inside ±10 % by 0.001: at two decimals it prints 0.91, like 1/1.1
    assert stats.interval_digits("slower", 0.910, 0.932) == 3
    # far from every edge, or a resolved end that is not near one: two decimals
    assert stats.interval_digits("slower", 0.66, 0.77) == 2
    assert stats.interval_digits("not resolved", 0.647, 1.201) == 2
    assert stats.interval_digits("not resolved", 0.95, 1.098) == 3  # 1.10 at two
    # a time taken of up to 1.1007 prints 1.101, not 1.10, which would read as inside ±10 %
    late = {"verdict": "slower", "speedup": 1 / 1.06, "low": 1 / 1.1007, "high": 1 / 1.03}
    assert stats.describe_speedup(late) == "slower, taking 1.060× as long (1.030–1.101×)"
    # two different ends never print alike: chapter 6's one pass, 1.017–1.024×, is not "1.02–1.02×"
    assert stats.interval_text(1.017, 1.024, "faster") == "1.017–1.024×"
    assert stats.interval_text(3.8201, 3.8249) == "3.820–3.825×"
    assert stats.interval_text(2.0, 2.0) == "2.00–2.00×"  # no spread at all: nothing to tell apart
    assert stats.interval_digits("not resolved", math.nan, math.nan) == 2  # nothing to tell apart either
    assert stats.interval_digits("not resolved", 1.5, math.inf) == 2


def test_an_agreement_reads_exactly_where_nothing_differs():
    assert stats.agreement(0.0) == "exactly" and stats.agreement(1.234e-7) == "to within 1.2 × 10⁻⁷"


def test_a_ratio_below_one_is_the_time_taken_whatever_the_verdict():
    """One convention per column: a speed-up of 0.83× (0.60–1.10×) not resolved reads as the time taken,
    1/0.83 = 1.20 as long, from 1/1.10 = 0.91 to 1/0.60 = 1.67, as a resolved slower one does."""
    unclear = {"verdict": "not resolved", "speedup": 0.83, "low": 0.60, "high": 1.10, "launches": (3, 3)}
    assert (
        stats.describe_speedup(unclear) == "not resolved, taking 1.20× as long (0.91–1.67×, 3 launches each)"
    )
    assert stats.shown_ratio(unclear) == pytest.approx((1 / 0.83, 1 / 1.10, 1 / 0.60))
    # an answer box's brief form: the verdict and the figure, to two decimals, the rest left to the body,
    # where the interval lies wholly inside ±10 % of 1 or wholly beyond it; one crossing that edge stays
    resolved = {"verdict": "faster", "speedup": 1.016, "low": 1.003, "high": 1.040, "launches": (3, 3)}
    assert stats.describe_speedup(resolved, brief=True) == "faster by under 10 %, 1.02×"
    large = {"verdict": "slower", "speedup": 0.2375, "low": 0.2, "high": 0.25, "launches": (3, 3)}
    assert stats.describe_speedup(large, brief=True) == "slower, taking 4.21× as long"
    many = {"verdict": "faster", "speedup": 54.87, "low": 37.46, "high": 72.66, "launches": (3, 3)}
    assert stats.describe_speedup(many, brief=True) == "faster, 54.9×"  # three digits, not 54.87
    wide = {"verdict": "faster", "speedup": 1.24, "low": 1.02, "high": 1.53, "launches": (3, 3)}
    assert stats.describe_speedup(wide, brief=True) == "faster, 1.24× (1.02–1.53×)"  # 2 % to 53 %
    assert stats.describe_speedup(unclear, brief=True) == "not resolved, taking 1.20× as long (0.91–1.67×)"
    assert stats.shown_ratio({"speedup": 1.2, "low": 0.9, "high": 1.5}) == (1.2, 0.9, 1.5)


@pytest.mark.parametrize(
    ("value", "text"), [(1920.4, "1,920"), (56.71, "56.7"), (0.006451, "0.00645"), (2.0, "2.00"), (0, "0")]
)
def test_figures_keep_three_significant_digits_written_out(value, text):
    assert stats.significant(value) == text
    assert stats.significant(math.nan) == "–"


def test_a_ratio_s_figures_read_as_describe_speedup_prints_them():
    # 1/0.83 = 1.205, its ends 1/0.91 = 1.099 and 1/0.76 = 1.316 (hand-computed), to three decimals: at
    # two, 1.099 would print 1.10, the edge of what matters; from 1 up as they are
    assert stats.ratio_figures(0.83, 0.76, 0.91) == ("1.205", "1.099–1.316×")
    assert stats.ratio_figures(1.52, 1.40, 1.61) == ("1.52", "1.40–1.61×")
    # a band hugging 1: 1/0.996 = 1.004, ends 1.002–1.006, never "1× (1–1.01×)"
    assert stats.ratio_figures(0.996, 0.994, 0.998) == ("1.004", "1.002–1.006×")


def test_a_speed_up_beside_its_interval_has_the_interval_s_decimals():
    assert stats.point_text(1.0166, 1.016, 1.018, "faster") == "1.017"  # beside 1.016–1.018×, not 1.02
    assert stats.point_text(2.0, 1.81, 2.21) == "2.00"


def test_a_tiny_or_huge_number_reads_as_a_power_of_ten_and_an_ordinary_one_plainly():
    assert stats.scientific(4.7e-10) == "4.7 × 10⁻¹⁰" and stats.scientific(3.9e-4) == "3.9 × 10⁻⁴"
    assert stats.scientific(0.0052) == "0.0052" and stats.scientific(0.315, 3) == "0.315"
    assert stats.scientific(1234.5) == "1,200" and stats.scientific(2.5e6) == "2.5 × 10⁶"
    assert stats.scientific(0) == "0" and stats.scientific(1e-5, 1) == "1 × 10⁻⁵"


def test_a_signed_number_carries_a_minus_sign_not_a_hyphen():
    assert stats.signed(-0.3, 1) == "−0.3" and stats.signed(0.25, 2) == "+0.25"
    assert stats.signed(-0.30512) == "−0.305" and stats.signed(19_000) == "+19,000"  # significant digits
    assert stats.signed(-1234.5, 0) == "−1,234"  # rounded half to even, as format does
