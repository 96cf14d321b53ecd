"""Money, exactly (chapter 5): rent-or-buy break-even, the seed's Table I, and the dollars of a result.

Every figure is a ``fractions.Fraction``, so that the seed's arithmetic can be checked digit for digit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction

import pandas as pd

from helpers.stats import plural

SECONDS_PER_HOUR = 3600


def exact(value) -> Fraction:
    """``value`` as a Fraction: ints, Fractions, Decimals and decimal strings exactly ("1.46" is 73/50).

    A float is read by its shortest decimal representation (0.45 becomes 9/20, not the binary double
    nearest to it): prices are typed in decimal, and that is the number the user meant.
    """
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"not a finite number: {value!r}")
        return Fraction(repr(value))
    if isinstance(value, int | Fraction | Decimal | str):
        return Fraction(value)
    raise TypeError(f"cannot read {value!r} as an exact number")


def decimal_expansion(value: Fraction, digits: int = 3) -> str:
    """``digits`` decimals of ``value``, truncated, with "…" when the expansion goes on (8/3 → "2.666…").

    Thousands are separated by commas; a terminating expansion is printed exactly (3/2 → "1.5").
    """
    value = exact(value)
    sign = "-" if value < 0 else ""
    value = abs(value)
    whole, rest = divmod(value.numerator, value.denominator)
    decimals = []
    for _ in range(digits):
        if rest == 0:
            break
        digit, rest = divmod(rest * 10, value.denominator)
        decimals.append(str(digit))
    text = f"{sign}{whole:,}" + ("." + "".join(decimals) if decimals else "")
    return text + ("…" if rest else "")


def fraction_text(value: Fraction) -> str:
    """``value`` as its fraction in lowest terms: 16000/3 → "16,000/3"; a whole number as itself."""
    value = exact(value)
    whole = f"{value.numerator:,}"
    return whole if value.denominator == 1 else f"{whole}/{value.denominator}"


def rounded(value: Fraction, places: int) -> str:
    """``value`` rounded half up (in decimal, not through a binary float) to ``places`` decimals, with
    thousands separators: 16000/3 → "5,333.3" at one place, 107/40 → "2.68" at two."""
    value = exact(value)
    quotient = Decimal(value.numerator) / Decimal(value.denominator)
    return f"{quotient.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP):,}"


def exactly(value: Fraction, places: int, unit: str = "") -> str:
    """A reader's decimal first, the exact fraction after it: 16000/3 → "5,333.3 h (exactly 16,000/3)".
    A value whose decimal ends within ``places`` is that decimal alone ("2,000 h", "0.0625"); a fraction
    of a denominator over 100 is its rounded decimal alone (its fraction would tell a reader nothing)."""
    value = exact(value)
    if (value * 10**places).denominator == 1:
        return f"{decimal_expansion(value, places)}{unit}"
    if value.denominator > 100:
        return f"{rounded(value, places)}{unit}"
    return f"{rounded(value, places)}{unit} (exactly {fraction_text(value)})"


@dataclass(frozen=True)
class BreakEven:
    """Rent-or-buy break-even; every field is exact (Fractions), ``hours_float``/``years_float`` are not."""

    machine_price: Fraction
    hourly_price: Fraction
    performance_adjustment: Fraction
    hours_per_year: Fraction
    effective_price: Fraction
    hours: Fraction
    years: Fraction

    @property
    def hours_float(self) -> float:
        return float(self.hours)

    @property
    def years_float(self) -> float:
        return float(self.years)


def break_even(machine_price, hourly_price, performance_adjustment=0, hours_per_year=2000) -> BreakEven:
    """Hours of rented use that cost as much as buying the machine, and the full-time years they make.

    The performance adjustment follows the seed's "adjusted by −30%": effective price = price ×
    (1 + adjustment), so −0.3 turns $8,000 into $5,600. (The seed lowers the price of its workstation,
    the faster of the two machines, by 30 %; the arithmetic is the same whichever way it is meant.)
    hours = effective price / hourly price; years = hours / hours_per_year (2,000 h: a full-time year).
    Pass prices as strings or ints for exact results ("1.50", 8000).
    """
    price, hourly, adjustment, per_year = map(
        exact, (machine_price, hourly_price, performance_adjustment, hours_per_year)
    )
    if price <= 0 or hourly <= 0 or per_year <= 0:
        raise ValueError("machine_price, hourly_price and hours_per_year must be positive")
    if adjustment <= -1:
        raise ValueError(f"performance_adjustment must be above -1 (-100%), not {performance_adjustment!r}")
    effective = price * (1 + adjustment)
    hours = effective / hourly
    return BreakEven(price, hourly, adjustment, per_year, effective, hours, hours / per_year)


def money(value) -> str:
    """Dollars with cents when the amount is whole cents ($1.50, $8,000.00), exactly when it ends within six
    decimals (a price of $27.44705 an hour), else its first four decimals and "…"."""
    value = exact(value)
    if (value * 100).denominator == 1:
        return f"${Decimal(value.numerator) / Decimal(value.denominator):,.2f}"
    whole = decimal_expansion(value, 6)
    return "$" + (decimal_expansion(value, 4) if whole.endswith("…") else whole)


def describe_break_even(result: BreakEven) -> str:
    """One line: the prices, then the break-even in hours and in full-time years (``exactly``: each a
    decimal, with its fraction beside it where that fraction is short)."""
    adjusted = (
        f" adjusted by {decimal_expansion(result.performance_adjustment * 100)}% to "
        f"{money(result.effective_price)}"
        if result.performance_adjustment
        else ""
    )
    return (
        f"{money(result.machine_price)}{adjusted} at {money(result.hourly_price)}/h → "
        f"{exactly(result.hours, 1, ' h')} = {exactly(result.years, 2, ' years')} of "
        f"{fraction_text(result.hours_per_year)} h"
    )


def dollars_per_epoch(epoch_seconds, hourly_price) -> Fraction:
    """epoch seconds × hourly price / 3600, exact (pass strings or ints for exact inputs)."""
    seconds, price = exact(epoch_seconds), exact(hourly_price)
    if seconds < 0 or price < 0:
        raise ValueError("epoch_seconds and hourly_price must not be negative")
    return seconds * price / SECONDS_PER_HOUR


def break_even_hour_value(dollars, hours, one_dollars, one_hours):
    """What an hour of waiting must be worth (dollars per hour) for a run of ``dollars`` over ``hours`` to
    cost less in total — machine dollars + hours × that value — than the one-GPU run of ``one_dollars``
    over ``one_hours``: (D_k − D_1) / (T_1 − T_k), the value above which the faster run wins. 0 where it is
    no dearer and no slower (cheaper whatever an hour is worth); ``math.inf`` where it is no faster (no
    value of waiting makes a slower run the cheaper one). Exact for exact inputs."""
    if dollars <= one_dollars and hours <= one_hours:
        return 0
    if hours >= one_hours:
        return math.inf
    return (dollars - one_dollars) / (one_hours - hours)


def hour_value_verdict(hour_value, low, high) -> str:
    """Whether runs whose break-even values of an hour span ``low``–``high`` (``break_even_hour_value`` over
    the uncertain inputs) cost no more in total than one GPU for someone whose hour is worth ``hour_value``:
    a run is no dearer in total exactly where the value reaches its break-even."""
    if hour_value >= high:
        return "no dearer in total whatever the inputs"
    if hour_value < low:
        return "dearer in total whatever the inputs"
    return "depends on the inputs"


# The seed paper's Table I: seconds per epoch and the hourly price of each setup (its own inputs).
SEED_TABLE_ONE = (("K80", "87", "0.45"), ("2×K80", "55", "0.90"), ("P100", "48", "1.46"))


def table_one(rows=SEED_TABLE_ONE, baseline: str = "K80", as_float: bool = True) -> pd.DataFrame:
    """The seed's Table I recomputed from its inputs: dollars per epoch, speed-up, cost ratios and Δ.

    For each setup against the baseline:

    - ``speedup`` = baseline epoch seconds / epoch seconds;
    - ``price_ratio`` = hourly price / baseline hourly price (the fold increase in cost per hour);
    - ``cost_per_epoch_ratio`` = dollars per epoch / baseline dollars per epoch;
    - ``delta`` (Δ) = speed-up per fold increase in cost = speedup / price_ratio. Algebraically Δ is
      1 / cost_per_epoch_ratio: Δ > 1 means the faster setup is also cheaper per epoch, Δ < 1 that speed
      is bought at a higher price per epoch (Δ = 1: speed-up exactly proportional to the price).

    ``as_float=False`` keeps every number an exact Fraction (what the tests check).
    """
    frame = pd.DataFrame(rows, columns=["setup", "epoch_seconds", "hourly_price"])
    frame["epoch_seconds"] = frame["epoch_seconds"].map(exact)
    frame["hourly_price"] = frame["hourly_price"].map(exact)
    if baseline not in set(frame["setup"]):
        raise ValueError(f"baseline {baseline!r} is not one of the setups {list(frame['setup'])}")
    base = frame.set_index("setup").loc[baseline]
    frame["dollars_per_epoch"] = [
        dollars_per_epoch(s, p) for s, p in zip(frame["epoch_seconds"], frame["hourly_price"], strict=True)
    ]
    frame["speedup"] = base["epoch_seconds"] / frame["epoch_seconds"]
    frame["price_ratio"] = frame["hourly_price"] / base["hourly_price"]
    frame["cost_per_epoch_ratio"] = frame["dollars_per_epoch"] / dollars_per_epoch(*base)
    frame["delta"] = frame["speedup"] / frame["price_ratio"]
    if as_float:
        numeric = frame.columns.drop("setup")
        frame[numeric] = frame[numeric].map(float)
    return frame


def scale_epoch(epoch_seconds, measured_samples: int, samples: int, batch: int) -> Fraction:
    """An epoch of ``samples`` clips from one timed on ``measured_samples`` at the same ``batch``: steps
    take the same time, so the epoch grows with its number of steps, ⌈samples / batch⌉ (exact)."""
    if min(measured_samples, samples, batch) < 1:
        raise ValueError("sample counts and batch must be positive")
    return exact(epoch_seconds) * math.ceil(samples / batch) / math.ceil(measured_samples / batch)


def to_target(epochs_to_target, epoch_seconds, hourly_price) -> dict:
    """Seconds, hours and dollars to reach a target accuracy: epochs needed × epoch time × price (exact)."""
    epochs, seconds = exact(epochs_to_target), exact(epoch_seconds)
    if epochs < 0:
        raise ValueError("epochs_to_target must not be negative")
    total = epochs * seconds
    return {
        "seconds": total,
        "hours": total / SECONDS_PER_HOUR,
        "dollars": epochs * dollars_per_epoch(seconds, hourly_price),
    }


def cost_to_target(epochs, setups: list[dict]) -> pd.DataFrame:
    """Seconds, hours and dollars to a result that takes ``epochs`` epochs, on each setup: ``{"setup",
    "basis",
    "epoch_seconds", "hourly_price"}`` (price None: hours only). Every epoch time must be of the same
    epoch — the same clips and batch — as the one ``epochs`` was counted in; ``basis`` says how it was
    obtained (measured, scaled by ``scale_epoch``, or predicted)."""
    rows = []
    for setup in setups:
        price = setup.get("hourly_price")
        cost = to_target(epochs, exact(setup["epoch_seconds"]), price if price is not None else 0)
        rows.append({"setup": setup["setup"], "basis": setup["basis"], "epochs": epochs,
                     "seconds": float(cost["seconds"]), "hours": float(cost["hours"]),
                     "dollars": float(cost["dollars"]) if price is not None else float("nan")})  # fmt: skip
    return pd.DataFrame(rows)


def epochs_to_accuracy(history: list[dict], target: float) -> int | None:
    """The first epoch whose test accuracy reaches ``target`` (None when the run never does)."""
    return next((row["epoch"] for row in history if row.get("test_accuracy", 0) >= target), None)


def measured_run_costs(records: list[dict], hourly_price_per_device, **settings) -> pd.DataFrame:
    """Table I for our own DDP runs: per model, every world size of the runs that match ``settings``
    (e.g. bucket_cap_mb=25, compression=None, seed=0), priced at ``hourly_price_per_device`` × ranks,
    against one rank."""
    frames = []
    for model in sorted({r["config"]["model"] for r in records if r["kind"] == "ddp_run"}):
        runs = {
            r["config"]["world_size"]: r["result"]["epoch_seconds"]
            for r in records
            if r["kind"] == "ddp_run" and r["config"]["model"] == model
            and all(r["config"].get(key) == value for key, value in settings.items())
        }  # fmt: skip
        if 1 not in runs or len(runs) < 2:
            continue
        rows = [
            (f"{model}, {k} {plural(k, 'rank')}", exact(seconds), exact(hourly_price_per_device) * k)
            for k, seconds in sorted(runs.items())
        ]
        costs = table_one(rows, baseline=f"{model}, 1 rank")
        frames.append(costs.assign(model=model, ranks=sorted(runs)))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


# One dated price table: every price the book uses, with the GPU it buys and where it was read.
# AWS on-demand, Linux, us-east-1, from the instances.vantage.sh snapshot kept in github.com/tsaol/aws-gpu
# (its data/p*_instances.js and data/g6*_instances.js files, "Last updated: 2026-08-26"), after AWS's
# June 2025 cut of P4 and P5 prices; read 2026-11-24.
AWS_SOURCE = "instances.vantage.sh snapshot in github.com/tsaol/aws-gpu (data/p*, g6*_instances.js)"
PRICES = (
    {"offer": "AWS p3.2xlarge", "gpu": "V100 SXM2 16 GB", "gpus": 1, "dollars": "3.06", "per": "hour",
     "source": AWS_SOURCE, "date": "2026-08-26"},
    {"offer": "AWS p3.8xlarge", "gpu": "V100 SXM2 16 GB", "gpus": 4, "dollars": "12.24", "per": "hour",
     "source": AWS_SOURCE, "date": "2026-08-26"},
    {"offer": "AWS p3.16xlarge", "gpu": "V100 SXM2 16 GB", "gpus": 8, "dollars": "24.48", "per": "hour",
     "source": AWS_SOURCE, "date": "2026-08-26"},
    {"offer": "AWS p4d.24xlarge", "gpu": "A100 SXM 40 GB", "gpus": 8, "dollars": "21.957642", "per": "hour",
     "source": AWS_SOURCE, "date": "2026-08-26"},
    {"offer": "AWS p4de.24xlarge", "gpu": "A100 SXM 80 GB", "gpus": 8, "dollars": "27.44705", "per": "hour",
     "source": AWS_SOURCE, "date": "2026-08-26"},
    {"offer": "AWS p5.4xlarge", "gpu": "H100 SXM 80 GB", "gpus": 1, "dollars": "6.88", "per": "hour",
     "source": AWS_SOURCE, "date": "2026-08-26"},
    {"offer": "AWS p5.48xlarge", "gpu": "H100 SXM 80 GB", "gpus": 8, "dollars": "55.04", "per": "hour",
     "source": AWS_SOURCE, "date": "2026-08-26"},
    {"offer": "AWS p5en.48xlarge", "gpu": "H200 SXM 141 GB", "gpus": 8, "dollars": "63.296", "per": "hour",
     "source": AWS_SOURCE, "date": "2026-08-26"},
    {"offer": "AWS g6.xlarge", "gpu": "L4", "gpus": 1, "dollars": "0.8048", "per": "hour",
     "source": AWS_SOURCE, "date": "2026-08-26"},
    {"offer": "AWS g6.12xlarge", "gpu": "L4", "gpus": 4, "dollars": "4.6016", "per": "hour",
     "source": AWS_SOURCE, "date": "2026-08-26"},
    {"offer": "AWS g6.48xlarge", "gpu": "L4", "gpus": 8, "dollars": "13.3504", "per": "hour",
     "source": AWS_SOURCE, "date": "2026-08-26"},
    {"offer": "AWS g6e.xlarge", "gpu": "L40S", "gpus": 1, "dollars": "1.861", "per": "hour",
     "source": AWS_SOURCE, "date": "2026-08-26"},
    {"offer": "AWS g6e.12xlarge", "gpu": "L40S", "gpus": 4, "dollars": "10.49264", "per": "hour",
     "source": AWS_SOURCE, "date": "2026-08-26"},
    {"offer": "AWS g6e.48xlarge", "gpu": "L40S", "gpus": 8, "dollars": "30.13118", "per": "hour",
     "source": AWS_SOURCE, "date": "2026-08-26"},
    {"offer": "GTX 1080 Ti, launch price", "gpu": "GTX 1080 Ti", "gpus": 1, "dollars": "699", "per": "card",
     "source": "latinpost.com (NVIDIA's MSRP at launch)", "date": "2017-03-23"},
    {"offer": "A100 80 GB PCIe card, low end of new units", "gpu": "A100 PCIe 80 GB", "gpus": 1,
     "dollars": "8000", "per": "card",
     "source": "aitooldiscovery.com, 'NVIDIA A100 GPU: Specs, Price, and Performance in 2026' "
               "(new A100 80 GB "
               "units $8,000-$15,000)", "date": "2026-03-20"},
)  # fmt: skip


def price_source(row: dict) -> str:
    """A price row's source and date, as every table of prices cites it."""
    return f"{row['source']}, {row['date']}"


def price_table() -> pd.DataFrame:
    """The price table, with the price per GPU (hourly offers: per GPU-hour), exact."""
    frame = pd.DataFrame(PRICES)
    frame["dollars_per_gpu"] = [exact(row["dollars"]) / row["gpus"] for row in PRICES]
    return frame


def hourly_price_per_gpu(gpu: str) -> Fraction | None:
    """What one GPU-hour of ``gpu`` costs on demand: the price table's largest instance of it, per GPU
    (None for a GPU no cloud rents, such as the seed's GTX 1080 Ti)."""
    offers = [row for row in PRICES if row["gpu"] == gpu and row["per"] == "hour"]
    if not offers:
        return None
    largest = max(offers, key=lambda row: row["gpus"])
    return exact(largest["dollars"]) / largest["gpus"]


# The seed's own words on renting against buying, beside what its inputs give exactly.
SEED_QUOTES = {
    "0": "~5,250 hours … ~2.5 years",
    "-0.3": "~3,750 hours … ~1.75 years",
}


def seed_break_even_table(machine_price, hourly_price, hours_per_year=2000) -> pd.DataFrame:
    """The seed's two cases — the machine at its price, and adjusted by −30 % — with the seed's quoted
    figures next to the exact ones (hours and years of ``hours_per_year`` h)."""
    rows = []
    for adjustment, quoted in SEED_QUOTES.items():
        result = break_even(machine_price, hourly_price, adjustment, hours_per_year)
        rows.append(
            {
                "case": "standard" if adjustment == "0" else "adjusted by −30 %",
                "the seed says": quoted,
                "hours": exactly(result.hours, 1),
                "years": exactly(result.years, 2),
            }
        )
    return pd.DataFrame(rows)
