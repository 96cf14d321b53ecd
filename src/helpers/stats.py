"""Timings with their spread (every chapter): a median with its minimum and maximum over the repeats, and
comparisons whose verdict says only what the interval supports.

A speed-up of A over B is the ratio of their medians. Its interval comes from the repeats:

- within one process (``speedup``), from the slowest A against the fastest B to the fastest A against the
  slowest B;
- across independent launches (``launch_speedup``: chapters 3, 5 and 6 start their ranks anew for every
  measurement), from a bootstrap over launches: each launch contributes its median step, the launches of
  each side are resampled with replacement, and the interval holds the middle 95 % of the resampled ratios
  of medians. Steps of one launch share its start-up, its placement on the cores and its neighbours, so
  they cannot stand for another launch; at least ``MIN_LAUNCHES`` per side are needed for a verdict.

The side of 1 decides first: a verdict is "faster" or "slower" whenever the whole interval lies above or
below 1, and its text adds "by under 10 %" where the interval also lies inside ±``MATTERS`` of 1
(measurable, but smaller than a difference that matters here: ``within_matters``); "no measurable
difference" when the interval contains 1 and lies inside ±``MATTERS``, close enough to exclude a difference
that matters; any other interval is "not resolved": the measurement cannot tell. A ratio below 1 is stated
as the time taken, its reciprocal ("slower, taking 2.04× as long"), so that the figure reads as its word
does (``shown_ratio``).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

import numpy as np

MIN_REPEATS = 5  # what the book calls a timing: at least five timed repetitions
MIN_LAUNCHES = 3  # what a comparison of launches needs before it says anything
MATTERS = 0.10  # a speed-up within 10 % of 1 is a difference that does not matter here
# a table's reference row: no verdict against itself, but the spread of its own launches against each other
BASELINE = "the baseline (its launches against each other)"
# Between the paragraphs of a long generated reading (``chapter.glue_all`` glues such text as Markdown)
PARAGRAPH_BREAK = "\n\n"
VERDICTS = ("faster", "slower", "no measurable difference", "not resolved")


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


def within_matters(low: float, high: float, matters: float = MATTERS) -> bool:
    """Whether an interval of speed-ups lies inside ±``matters`` of 1 (1/(1 + matters) to 1 + matters)."""
    return low >= 1 / (1 + matters) and high <= 1 + matters


def verdict(low: float, high: float, matters: float = MATTERS) -> str:
    """What an interval of speed-ups says: "faster" (all above 1), "slower" (all below), "no measurable
    difference" (straddles 1, inside ±``matters``), else "not resolved"."""
    if low > 1:
        return VERDICTS[0]
    if high < 1:
        return VERDICTS[1]
    if within_matters(low, high, matters):
        return VERDICTS[2]
    return VERDICTS[3]


def speedup(baseline, candidate, matters: float = MATTERS) -> dict:
    """How much faster ``candidate`` runs than ``baseline`` (both: repeated seconds of the same work, in
    one process): the ratio of medians, its min–max pairing interval, and its ``verdict``."""
    base, new = spread(baseline), spread(candidate)
    low, high = base.low / new.high, base.high / new.low
    ratio, judged = base.median / new.median, verdict(low, high, matters)
    return {"speedup": ratio, "low": low, "high": high, "verdict": judged, "launches": None}


def launch_speedup(
    baseline_launches, candidate_launches, *, resamples: int = 4000, level: float = 0.95,
    matters: float = MATTERS, seed: int = 0,
) -> dict:  # fmt: skip
    """How much faster ``candidate`` runs than ``baseline``, each given as independent launches (a list of
    each launch's step seconds): the ratio of the medians of the launches' median steps, and a bootstrap
    interval over launches (``level``, percentile method, ``resamples`` draws, seeded). With fewer than
    ``MIN_LAUNCHES`` launches on a side the verdict is "not resolved" whatever the interval."""
    base = np.array([statistics.median(steps) for steps in baseline_launches], dtype=float)
    new = np.array([statistics.median(steps) for steps in candidate_launches], dtype=float)
    if not len(base) or not len(new):
        raise ValueError("a comparison of launches needs at least one launch on each side")
    generator = np.random.default_rng(seed)
    draws = np.median(generator.choice(base, (resamples, len(base))), axis=1) / np.median(
        generator.choice(new, (resamples, len(new))), axis=1
    )
    tail = (1 - level) / 2 * 100
    low, high = (float(value) for value in np.percentile(draws, [tail, 100 - tail]))
    enough = min(len(base), len(new)) >= MIN_LAUNCHES
    return {
        "speedup": float(np.median(base) / np.median(new)),
        "low": low,
        "high": high,
        "verdict": verdict(low, high, matters) if enough else VERDICTS[3],
        "launches": (len(base), len(new)),
    }


def interval_label(launch_counts) -> str:
    """The column name of ``launch_speedup`` intervals, for what they are: with three launches a side in
    every row, the bootstrap's 95 % interval is exactly the range of the ratios of one side's launches to
    the other's (``ddp_results.interval_note``), so it is called that; otherwise a 95 % interval."""
    counts = [tuple(count) for count in launch_counts]
    return "range of launch ratios" if counts and all(c == (3, 3) for c in counts) else "95 % interval"


def listed(items) -> str:
    """Items in a sentence: ``a``, ``a and b``, ``a, b and c``."""
    words = [str(item) for item in items]
    return ", ".join(words[:-1]) + " and " + words[-1] if len(words) > 1 else "".join(words)


def batch_runs(pairs) -> list[tuple[str, int, int]]:
    """(batch, word) pairs, in batch order, as runs of one word: (word, first batch, last batch)."""
    runs: list[list] = []
    for batch, word in pairs:
        if runs and runs[-1][0] == word:
            runs[-1][2] = batch
        else:
            runs.append([word, batch, batch])
    return [tuple(run) for run in runs]


def run_phrases(runs) -> list[str]:
    """``batch_runs`` in words: "faster at batch 10", "slower from batch 20 to 600"."""
    return [f"{word} at batch {first}" if first == last else f"{word} from batch {first} to {last}"
            for word, first, last in runs]  # fmt: skip


def whole_percent(share: float) -> str:
    """A share in whole per cent as the book writes it: ``29 %``."""
    return f"{share * 100:.0f} %"


def significant(value: float, digits: int = 3) -> str:
    """``value`` to ``digits`` significant digits, written out in full with thousands separators
    ("1,920", "56.7", "0.00645"), never as 1.92e+03; NaN as "–"."""
    if math.isnan(value):
        return "–"
    if value == 0:
        return "0"
    rounded = float(f"{value:.{digits}g}")
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(rounded))))
    return f"{rounded:,.{decimals}f}"


SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def scientific(value: float, digits: int = 2) -> str:
    """A number as a reader writes it, to ``digits`` significant digits: plain from 0.001 to 9,999
    ("0.0052"), a power of ten beyond ("4.7 × 10⁻¹⁰", never "4.7e-10"); 0 as "0"."""
    if value == 0:
        return "0"
    mantissa, exponent = f"{value:.{digits - 1}e}".split("e")
    if -3 <= int(exponent) < 4:
        return significant(value, digits)
    return f"{mantissa} × 10{str(int(exponent)).translate(SUPERSCRIPT)}"


def agreement(difference: float) -> str:
    """How closely two runs agree, for a sentence: "exactly" where the largest difference is 0 (not "to
    within 0.0e+00"), else "to within 1.2 × 10⁻⁷" (``scientific``)."""
    return "exactly" if difference == 0 else f"to within {scientific(difference)}"


def ms(seconds: float) -> str:
    """Seconds as milliseconds to three significant digits, never in powers of ten: 2,500, 12.3, 0.270."""
    return significant(seconds * 1e3)


def plural(count: int, noun: str) -> str:
    """``noun`` as ``count`` of it are called: launch, launches; round, rounds; epoch, epochs (a hard
    "ch")."""
    sibilant = noun.endswith(("ch", "sh", "s", "x")) and not noun.endswith("epoch")
    return noun if count == 1 else noun + ("es" if sibilant else "s")


def apart_digits(low: float, high: float, digits: int = 2) -> int:
    """The decimals, at least ``digits`` and at most 4, at which two different finite ends print apart
    (1.017–1.024, not 1.02–1.02, which reads as no spread at all); any interval, not only a speed-up's."""
    distinct = math.isfinite(low) and math.isfinite(high) and low != high
    while distinct and digits < 4 and f"{low:.{digits}f}" == f"{high:.{digits}f}":
        digits += 1
    return digits


def interval_digits(verdict: str, low: float, high: float, digits: int = 2) -> int:
    """The decimals an interval needs, at least ``digits`` and at most 4, so that no end prints like a
    line it does not reach: 1 for a resolved ``verdict`` (0.962–0.997×, not 0.96–1.00×), or an edge of
    what matters, 1/(1 + ``MATTERS``) or 1 + ``MATTERS`` (1.1007 prints 1.101, not 1.10, which reads as
    inside ±10 %), or, at two decimals, 1 − ``MATTERS`` (0.903 prints 0.903, not 0.90, like 10 % slower);
    and so that two different ends never print alike (``apart_digits``)."""

    def misprinted(bound: float, places: int) -> bool:
        shown = f"{bound:.{places}f}"
        edges = (1 / (1 + MATTERS), 1 + MATTERS) + ((1 - MATTERS,) if places == 2 else ())
        touches_one = verdict in ("faster", "slower") and bound != 1 and shown == f"{1:.{places}f}"
        return touches_one or any(
            shown == f"{e:.{places}f}" and not math.isclose(bound, e, rel_tol=1e-6) for e in edges
        )

    digits = apart_digits(low, high, digits)  # more decimals keep them apart: only the edges remain
    while digits < 4 and any(misprinted(bound, digits) for bound in (low, high)):
        digits += 1
    return digits


def point_text(value: float, low: float, high: float, verdict: str = "not resolved") -> str:
    """A speed-up in a table beside its interval (``interval_text``), with the interval's decimals: 1.016
    beside 1.016–1.018×, never 1.02, which reads as outside it."""
    return f"{value:.{interval_digits(verdict, low, high)}f}"


def interval_text(low: float, high: float, verdict: str = "not resolved", digits: int = 2) -> str:
    """An interval of speed-ups as a table or sentence shows it: ``0.74–1.90×``, with the decimals it
    needs not to print as touching 1 or an edge of what matters (``interval_digits``)."""
    digits = interval_digits(verdict, low, high, digits)
    return f"{low:.{digits}f}–{high:.{digits}f}×"


def verdict_words(verdict: str, low: float, high: float) -> str:
    """A verdict as the book writes it: "faster" or "slower", with "by under 10 %" where the interval also
    lies inside ±``MATTERS`` of 1 (``within_matters``); any other verdict as it is."""
    if verdict in ("faster", "slower") and within_matters(low, high):
        return f"{verdict} by under {MATTERS * 100:.0f} %"  # measurable, and smaller than what matters here
    return verdict


def shown_ratio(result: dict) -> tuple[float, float, float]:
    """A speed-up and its interval as the book states them (``describe_speedup``): as they are from 1 up,
    and below 1 as the time taken, the speed-up's reciprocal with its interval's ends swapped; so a column
    of them never mixes the two ways of reading a ratio below 1."""
    ratio, low, high = result["speedup"], result["low"], result["high"]
    return (1 / ratio, 1 / high, 1 / low) if ratio < 1 else (ratio, low, high)


def signed(value: float, digits: int | None = None) -> str:
    """``value`` with its sign, as type sets it (a minus sign, not a hyphen): to ``digits`` decimals
    ("+0.3", "−0.3"), or, without ``digits``, to ``significant``'s three digits ("−0.305", "+19,000")."""
    if digits is None:
        return ("−" if value < 0 else "+") + significant(abs(value))
    return f"{value:+,.{digits}f}".replace("-", "−")


def ratio_words(speedup: float, digits: int = 2, per: str = "") -> str:
    """A speed-up as the book says it (``shown_ratio``): "1.52×" from 1 up, and below 1 the time taken,
    "1.20× as long" (``per``: what that time is of, " per sample"; ``describe_speedup`` puts "taking"
    before it)."""
    return f"{speedup:.{digits}f}×" if speedup >= 1 else f"{1 / speedup:.{digits}f}× as long{per}"


def ratio_figures(speedup: float, low: float, high: float, digits: int = 2) -> tuple[str, str]:
    """A speed-up and its interval as ``describe_speedup`` prints their numbers, for a sentence that words
    them itself: ("1.52", "1.40–1.61×"), and below 1 those of the time taken (``shown_ratio``: 0.83×
    (0.76–0.91×) gives ("1.20", "1.10–1.31×")), with the decimals the interval needs (``interval_digits``,
    the verdict read from the interval: 1.004× (1.002–1.006×), never 1× (1–1.01×))."""
    verdict = "faster" if low > 1 else "slower" if high < 1 else "not resolved"
    shown, shown_low, shown_high = shown_ratio({"speedup": speedup, "low": low, "high": high})
    digits = interval_digits(verdict, shown_low, shown_high, digits)
    return f"{shown:.{digits}f}", interval_text(shown_low, shown_high, verdict, digits)


def describe_speedup(
    result: dict, digits: int = 2, unit: str = "launch", per: str = "", brief: bool = False
) -> str:
    """The verdict first, then the figure: ``faster, 1.52× (1.40–1.61×)``, ``not resolved, 1.02×
    (0.74–1.90×, 3 launches each)``; a speed-up below 1 as the time taken (``shown_ratio``), so that the
    figure reads the way the word does: ``slower, taking 2.04× as long (1.96–2.17×)`` for a speed-up of
    0.49× (0.46–0.51×), ``not resolved, taking 1.20× as long (0.60–1.10×)`` for 0.83× (0.91–1.67×). One
    phrase, no nested parentheses, to sit in a sentence. ``unit`` names what was repeated, in the singular
    (an independent launch, a round of measurements); ``per`` what the time taken is of, where a speed-up
    is a rate (" per sample"). An interval wholly on one side of 1 gets the decimals it needs not to print
    as touching 1 (1.003–1.040×, not 1.00–1.04×). ``brief``, for an answer box whose body gives the rest:
    the verdict and the figure alone, to three significant digits (``slower, taking 2.04× as long``), where
    the interval lies wholly beyond ±``MATTERS`` of 1 or wholly inside it (the verdict's words say which);
    an interval that crosses that edge is kept, without its launch count (``faster, 1.24× (1.02–1.53×)``:
    the point alone would claim more than 2 %)."""
    ratio, low, high = shown_ratio(result)
    digits = interval_digits(result["verdict"], low, high, digits)
    said = verdict_words(result["verdict"], result["low"], result["high"])
    taking = "taking " if result["speedup"] < 1 else ""
    if brief and (low >= 1 + MATTERS or within_matters(result["low"], result["high"])):
        shown = (2 if ratio < 10 else 1 if ratio < 100 else 0) if f"{ratio:.2f}" != "1.00" else digits
        return f"{said}, {taking}{ratio_words(result['speedup'], shown, per)}"  # 1.26×, 54.9×
    interval = interval_text(low, high, result["verdict"], digits)
    launches = result.get("launches")
    if launches and not brief:
        counted = (
            f"{launches[0]} {plural(launches[0], unit)} each"
            if launches[0] == launches[1]
            else f"{launches[0]} and {launches[1]} {plural(launches[1], unit)}"
        )
        interval += f", {counted}"
    return f"{said}, {taking}{ratio_words(result['speedup'], digits, per)} ({interval})"
