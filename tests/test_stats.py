"""helpers.stats: a median with its spread, and a speed-up called faster only outside the noise."""

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


def test_speedup_verdicts():
    base = [10, 10.5, 11, 9.5, 10]
    assert stats.speedup(base, [5, 5.2, 4.9, 5.1, 5])["verdict"] == "faster"
    assert stats.speedup(base, [20, 21, 19, 20, 22])["verdict"] == "slower"
    overlapping = stats.speedup(base, [9.8, 10.2, 10, 11.5, 9.6])
    assert overlapping["verdict"] == "no measurable difference"
    assert overlapping["low"] == pytest.approx(9.5 / 11.5) and overlapping["high"] == pytest.approx(11 / 9.6)
    assert stats.describe_speedup(overlapping).startswith("no measurable difference (1.00x, 0.83–1.15x)")
    assert stats.describe_speedup(stats.speedup(base, [5] * 5)) == "faster: 2.00x (1.90–2.20x)"
