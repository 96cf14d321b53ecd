"""Timings with their spread (every chapter): a median with its minimum and maximum over the repeats, and a
comparison that calls a difference inside the noise "no measurable difference".

A speed-up of A over B is the ratio of their medians; its interval runs from the slowest A against the
fastest B to the fastest A against the slowest B. Only an interval that excludes 1 is called faster or
slower: with five repeats each, that is a difference no pair of single runs contradicts.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import numpy as np

MIN_REPEATS = 5  # what the book calls a timing: at least five timed repetitions


@dataclass(frozen=True)
class Spread:
    """Median, quartiles and extremes of repeated measurements of one quantity."""

    median: float
    low: float
    high: float
    q1: float
    q3: float
    count: int

    def text(self, unit: str = "s", scale: float = 1.0, digits: int = 3, repeats: str = "runs") -> str:
        """``1.23 s (1.20–1.30, 5 runs)``: the median, then min–max and the number of ``repeats``."""

        def number(value: float) -> str:
            return f"{value * scale:.{digits}g}"

        suffix = f" {unit}" if unit else ""
        return (
            f"{number(self.median)}{suffix} ({number(self.low)}–{number(self.high)}, {self.count} {repeats})"
        )


def spread(values) -> Spread:
    """The ``Spread`` of ``values`` (at least one; a single value has no spread)."""
    values = [float(v) for v in values]
    if not values:
        raise ValueError("a spread needs at least one value")
    q1, q3 = np.percentile(values, [25, 75])
    return Spread(statistics.median(values), min(values), max(values), float(q1), float(q3), len(values))


VERDICTS = ("faster", "slower", "no measurable difference")


def speedup(baseline, candidate) -> dict:
    """How much faster ``candidate`` runs than ``baseline`` (both: repeated seconds of the same work).

    Returns the ratio of medians, its interval (slowest-fastest to fastest-slowest pairing) and the
    verdict: "faster" when the whole interval is above 1, "slower" when below, else "no measurable
    difference".
    """
    base, new = spread(baseline), spread(candidate)
    low, high = base.low / new.high, base.high / new.low
    verdict = VERDICTS[0] if low > 1 else VERDICTS[1] if high < 1 else VERDICTS[2]
    return {"speedup": base.median / new.median, "low": low, "high": high, "verdict": verdict}


def describe_speedup(result: dict, digits: int = 2) -> str:
    """``faster: 1.52x (1.40–1.61x)``, ``slower: 0.61x (…)`` or
    ``no measurable difference (1.01x, 0.95–1.08x)``."""
    interval = f"{result['low']:.{digits}f}–{result['high']:.{digits}f}x"
    if result["verdict"] == "no measurable difference":
        return f"no measurable difference ({result['speedup']:.{digits}f}x, {interval})"
    return f"{result['verdict']}: {result['speedup']:.{digits}f}x ({interval})"
