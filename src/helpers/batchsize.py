"""The batch-size limit (chapter 6): how many steps a target loss takes at each global batch, where
doubling the batch stops halving them, and the gradient noise scale that predicts where.

Shallue et al. ("Measuring the Effects of Data Parallelism on Neural Network Training", JMLR 2019) found
that steps to a target fall in proportion to the batch up to a *critical batch size*, then flatten.
McCandlish et al. ("An Empirical Model of Large-Batch Training", 2018) model it as
S(B) = S_min (1 + B_crit / B): samples E = S·B = E_min (1 + B / B_crit), with E_min = S_min·B_crit, and
predict B_crit by the gradient noise scale B_simple = tr(Σ) / |G|², from per-sample gradients g_i:
G their mean, Σ their covariance. Their B_crit assumes the learning rate tuned at every batch; the fits
here are of fixed recipes (a fixed rate, or one scaled linearly with the batch), whose knee is the batch
where that recipe stops saving steps, not McCandlish's B_crit.

Batches drawn without replacement from N clips vary less than independent draws: a batch of B has
(N − B)/(N − 1) of the gradient variance (``finite_population_factor``), so the experiment runs on the
whole training split, where that factor stays near 1 for every batch it measures.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch
from torch import nn
from torch.func import functional_call, grad, vmap
from torch.utils.data import TensorDataset
from tqdm import tqdm

from helpers.data import load_fsdd, take
from helpers.models import build_model
from helpers.train import check_positive, counted, epoch_batches, evaluate, make_optimizer

# The symbols as the book typesets them in tables and glued sentences (\(…\) is math there; "$" a dollar)
S_MIN, E_MIN, B_KNEE = r"\(S_{\min}\)", r"\(E_{\min}\)", r"\(B_{\text{knee}}\)"
B_SIMPLE = r"\(B_{\text{simple}}\)"

RESAMPLES = 2000  # bootstrap draws of a noise-scale interval


def learning_rate(base_lr: float, base_batch: int, batch: int, rule: str) -> float:
    """The peak learning rate at ``batch``: ``base_lr`` ("fixed") or scaled with the batch ("linear")."""
    if rule not in ("fixed", "linear"):
        raise ValueError(f"the learning-rate rule must be 'fixed' or 'linear', not {rule!r}")
    return base_lr * (batch / base_batch if rule == "linear" else 1)


def finite_population_factor(samples: int, batch: int) -> float:
    """(N − B)/(N − 1): the share of an independent draw's gradient variance that a batch of ``batch``
    clips drawn without replacement from ``samples`` keeps (1 for B = 1, 0 for the whole set)."""
    check_positive(samples=samples, batch=batch)
    if batch > samples:
        raise ValueError(f"a batch of {batch} exceeds the {samples} training samples")
    return 1.0 if samples == 1 else (samples - batch) / (samples - 1)


def steps_to_target(
    model_name: str,
    train_set: TensorDataset,
    *,
    global_batch: int,
    lr: float,
    target_loss: float,
    max_steps: int,
    warmup_steps: int = 0,
    eval_every: int = 10,
    seed: int = 0,
    optimizer: str = "adam",
) -> dict:
    """Train until the loss on all of ``train_set`` is at most ``target_loss``: the steps that took.

    The learning rate rises linearly from 0 to ``lr`` over ``warmup_steps``, then stays. The loss is
    evaluated every ``eval_every`` steps; ``steps`` is None when ``max_steps`` did not reach the target.
    """
    check_positive(global_batch=global_batch, max_steps=max_steps, eval_every=eval_every)
    torch.manual_seed(seed)
    model = build_model(model_name)
    updater = make_optimizer(optimizer, model.parameters(), lr)
    inputs, targets = train_set.tensors
    history, reached = [], None
    for step, index in enumerate(epoch_batches(len(targets), global_batch, seed, max_steps), start=1):
        for group in updater.param_groups:
            group["lr"] = lr * min(1.0, step / warmup_steps) if warmup_steps else lr
        updater.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(model(inputs[index]), targets[index]).backward()
        updater.step()
        if step % eval_every == 0:
            loss, accuracy = evaluate(model, train_set)
            history.append({"step": step, "loss": loss, "accuracy": accuracy})
            if loss <= target_loss:
                reached = step
                break
    return {"steps": reached, "samples": reached * global_batch if reached else None, "history": history}


def stored_steps_to_target(
    store, model_name: str, train_samples: int | None, *, rule: str, base_lr: float, base_batch: int,
    global_batch: int, measure=None, **settings,
) -> dict:  # fmt: skip
    """``steps_to_target`` on a seeded subset of FSDD's training clips (None: all of them), through the
    results store, at the learning rate ``rule`` gives ``global_batch`` (``learning_rate``). ``measure``,
    if given, supplies the result instead of training (a run already made with the same learning rate)."""
    lr = learning_rate(base_lr, base_batch, global_batch, rule)
    config = {"kind": "steps_to_target", "model": model_name, "train_samples": train_samples,
              "rule": rule, "global_batch": global_batch, "lr": lr, "threads": torch.get_num_threads(),
              **settings}  # fmt: skip

    def train() -> dict:
        train_set = take(load_fsdd().split("train"), train_samples, settings.get("seed", 0))
        return steps_to_target(model_name, train_set, global_batch=global_batch, lr=lr, **settings)

    return store.measure(config, measure or train)


def stored_critical_batch(store, model_name: str, train_samples: int, *, rules, seeds, batches, **settings):
    """``stored_steps_to_target`` for every learning-rate rule, seed and global batch: the records.

    At the smallest batch every rule gives the base learning rate, so the runs are the same: it trains
    once, and the other rules' records hold that result under their own configuration (chapter 5 reads
    the records per rule)."""
    if train_samples is None:  # every clip, counted: chapter 5 quotes the number
        train_samples = len(load_fsdd().split("train"))
    grid = [(seed, batch, rule) for seed in seeds for batch in batches for rule in rules]
    records, trained = [], {}
    for seed, batch, rule in tqdm(grid, desc="steps to target"):
        lr = learning_rate(settings["base_lr"], min(batches), batch, rule)
        same = trained.get((seed, batch, lr))
        measure = None if same is None else (lambda result=same["result"]: result)
        record = stored_steps_to_target(store, model_name, train_samples, rule=rule, seed=seed,
                                        global_batch=batch, base_batch=min(batches), measure=measure,
                                        **settings)  # fmt: skip
        trained.setdefault((seed, batch, lr), record)
        records.append(record)
    return records


def fit_critical_batch(batches, steps) -> dict:
    """S_min and B_crit of S(B) = S_min + S_min·B_crit / B by least squares on (1/B, S), with E_min.

    Needs at least three batch sizes that reached the target. Steps that do not fall as the batch grows
    give B_crit = 0 (every batch is past it); steps that fall in proportion, with no floor, give
    B_crit = ∞ (every batch is below it).
    """
    batch = np.asarray(batches, dtype=float)
    step = np.asarray(steps, dtype=float)
    if len(batch) < 3:
        raise ValueError("fitting the critical batch needs three or more batch sizes that reached the target")
    slope, intercept = np.polyfit(1 / batch, step, 1)
    if slope <= 0:
        return {"s_min": float(step.mean()), "b_crit": 0.0, "e_min": 0.0}
    if intercept <= 1e-9 * step.max():  # no floor, to rounding
        return {"s_min": float(intercept), "b_crit": math.inf, "e_min": float(slope)}
    return {"s_min": float(intercept), "b_crit": float(slope / intercept), "e_min": float(slope)}


def per_sample_gradients(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Every sample's loss gradient, flattened: [samples, parameters] (``torch.func.vmap`` over ``grad``)."""
    parameters = {name: p.detach() for name, p in model.named_parameters()}

    def loss(values, sample, target):
        logits = functional_call(model, values, (sample.unsqueeze(0),))
        return nn.functional.cross_entropy(logits, target.unsqueeze(0))

    gradients = vmap(grad(loss), in_dims=(None, 0, 0))(parameters, inputs, targets)
    return torch.cat([gradients[name].reshape(len(inputs), -1) for name in parameters], dim=1)


def gradient_noise_scale(
    model: nn.Module, dataset: TensorDataset, chunk: int = 16, groups: int | None = None, seed: int = 0
) -> dict:
    """B_simple = tr(Σ) / |G|² over every sample of ``dataset``, from per-sample gradients in chunks.

    tr(Σ) is the unbiased variance of the per-sample gradients summed over parameters; |G|² the squared
    norm of their mean, less tr(Σ)/n (its bias from a finite sample). The gradients are float64 sums of
    float32 per-sample gradients.

    With ``groups``, the samples are dealt at random (``seed``) into that many groups of nearly equal
    size, and the result also keeps what a bootstrap over them needs (``noise_interval``): each group's
    count of samples, its sum of squared gradient norms, and the Gram matrix of the groups' gradient sums
    (float64 products of sums stored in float32, so memory is ``groups`` gradients, not one per sample).
    """
    inputs, targets = dataset.tensors
    n = len(targets)
    if n < 2:
        raise ValueError("the noise scale needs at least two samples")
    if groups is not None and not 2 <= groups <= n:
        raise ValueError(f"groups must be between 2 and the {n} samples, not {groups!r}")
    order = (
        torch.arange(n)
        if groups is None
        else torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    )
    members = [order] if groups is None else list(torch.tensor_split(order, groups))
    total, squares, group_sums, group_squares = None, 0.0, None, []
    for number, member in enumerate(members):
        group_total, group_square = None, 0.0
        for start in range(0, len(member), chunk):
            index = member[start : start + chunk]
            block = per_sample_gradients(model, inputs[index], targets[index]).double()
            group_total = block.sum(0) if group_total is None else group_total + block.sum(0)
            group_square += float((block**2).sum())
        total = group_total if total is None else total + group_total
        squares += group_square
        if groups is not None:
            if group_sums is None:
                group_sums = torch.empty(groups, len(group_total))
            group_sums[number] = group_total  # stored in float32
            group_squares.append(group_square)
    mean = total / n
    trace, signal = noise_terms(n, squares, float(mean @ mean))
    result = {
        "samples": n,
        "trace_sigma": trace,
        "gradient_norm2": signal,
        "b_simple": trace / signal if signal > 0 else math.inf,
    }
    if groups is not None:
        gram = torch.zeros(groups, groups, dtype=torch.float64)
        # float64 products, a slice of 2**20 parameters at a time
        for start in range(0, group_sums.shape[1], 2**20):
            part = group_sums[:, start : start + 2**20].double()
            gram += part @ part.T
        result["groups"] = {"samples": [len(m) for m in members], "squares": group_squares,
                            "gram": gram.tolist()}  # fmt: skip
    return result


def noise_terms(samples, squares, mean_norm2):
    """tr(Σ) and |G|² (``gradient_noise_scale``) from ``samples`` gradients' sum of squared norms and
    their mean's squared norm: floats, or numpy arrays of them (one per bootstrap draw)."""
    trace = (squares - samples * mean_norm2) / (samples - 1)
    return trace, mean_norm2 - trace / samples


def noise_interval(point: dict, resamples: int = RESAMPLES, level: float = 0.90, seed: int = 0) -> tuple:
    """The ``level`` bootstrap interval (percentile, seeded) of one checkpoint's B_simple, over its groups of
    random clips (``gradient_noise_scale(groups=...)``), from the same sums as its estimate: each draw takes
    the groups with replacement and recomputes tr(Σ) and |G|² from their counts, squares and Gram matrix.

    Each draw's |G|² is recentred by the draws' bias, their mean less the estimate. Resampled clips
    estimate the squared norm of the data's own mean gradient, |mean|², which exceeds the estimate
    |G|² = |mean|² − tr(Σ)/n by the noise the estimate takes away; left as they are, the draws centre on
    tr(Σ)/|mean|², below B_simple (at step 200 of the cpu run, 302 against 341), and in a simulation with a
    known B_simple (``tests/test_batchsize.py``) such 90 % intervals held it 61 % of the time at the cpu
    run's size and B_simple = n/8; recentred, 91 %, and 91–100 % over other noise scales and spectra (96 %
    for one like the measured run's): conservative, since a draw's |G|² carries a little more noise than
    the estimate's own. The upper end is infinite when more than the upper tail of draws leave no mean
    gradient above the noise (|G|² ≤ 0): the data then bound B_simple from below only. (nan, nan) without
    groups."""
    if "groups" not in point:
        return math.nan, math.nan
    counts = np.asarray(point["groups"]["samples"], dtype=float)
    squares = np.asarray(point["groups"]["squares"], dtype=float)
    gram = np.asarray(point["groups"]["gram"], dtype=float)
    groups, samples = len(counts), counts.sum()
    _, estimate = noise_terms(samples, squares.sum(), gram.sum() / samples**2)
    weights = np.random.default_rng(seed).multinomial(groups, np.full(groups, 1 / groups), size=resamples)
    drawn = weights @ counts
    mean_norm2 = np.einsum("rk,kl,rl->r", weights, gram, weights) / drawn**2
    trace, signal = noise_terms(drawn, weights @ squares, mean_norm2)
    signal = signal - (signal.mean() - estimate)  # about −tr(Σ)/n: centred on the estimate
    draws = np.where(signal > 0, trace / np.where(signal > 0, signal, 1.0), np.inf)
    tail = (1 - level) / 2
    low, high = np.quantile(draws, [tail, 1 - tail], method="inverted_cdf")  # draws, inf included
    return float(low), float(high)


def noise_points(record: dict, resamples: int = RESAMPLES) -> pd.DataFrame:
    """A noise-scale record's checkpoints as a table, one row per checkpoint, with its bootstrap interval
    (``noise_interval``: ``b_low``, ``b_high``; NaN for a record measured without groups) and the probed
    clips' own noise scale, ``b_own`` = tr(Σ)/|mean|² with Σ their covariance (divisor n) and mean their
    mean gradient, both exact for those clips: where they are the whole training set, the noise that
    batches drawn from it see."""
    rows = []
    for point in record["result"]["points"]:
        low, high = noise_interval(point, resamples)
        groups = len(point["groups"]["samples"]) if "groups" in point else None
        kept = {key: value for key, value in point.items() if key != "groups"}
        n, trace = point["samples"], point["trace_sigma"]
        own = trace * (n - 1) / n / (point["gradient_norm2"] + trace / n)  # |mean|² = |G|² + tr(Σ)/n
        rows.append(kept | {"b_low": low, "b_high": high, "groups": groups, "b_own": own})
    return pd.DataFrame(rows)


def probe_words(points: pd.DataFrame, clips: int) -> str:
    """Which clips' per-sample gradients a noise-scale record used, out of the ``clips`` it trained on."""
    samples = int(points["samples"].iloc[0])
    if samples == clips:
        return f"all {clips:,} training clips (n = {clips:,})"
    return f"{samples:,} of the {clips:,} training clips, drawn at random (n = {samples:,})"


def interval_note(points: pd.DataFrame, resamples: int = RESAMPLES) -> str:
    """How the noise-scale intervals were drawn, and how often such intervals held a known noise scale in
    simulations, or that the record has none, for the chapter's prose."""
    if points["groups"].isna().all():
        return "This run kept no per-group sums, so its estimates have no interval."
    groups, samples = int(points["groups"].iloc[0]), int(points["samples"].iloc[0])
    low, high = samples // groups, -(-samples // groups)
    size = f"{low:,} clips each" if low == high else f"{low:,} or {high:,} clips each"
    return (
        f"The interval is a bootstrap over the clips: they are dealt at random into {groups} groups "
        f"({size}), and {resamples:,} draws of {groups} groups with replacement recompute tr(Σ) and |G|² "
        "from the groups' sums, the sums the estimate itself comes from. Each draw's |G|² is moved down by "
        "the draws' mean excess over the estimate (about tr(Σ)/n: a resample takes the data's own mean "
        "gradient, noise and all, for the truth). Without that correction, 90 % intervals missed a known "
        "noise scale far more often than 10 % of the time in simulations; with it, they held it in 91–100 % "
        "of them, the more the larger the noise scale: if anything, the interval is too wide. The table "
        "gives the 5th to 95th percentile of the draws, ∞ where more than 5 % of them leave no mean "
        "gradient above the noise. Groups rather than "
        "single clips are resampled so that memory holds one gradient per group, not one per clip; the "
        "groups are random, so they vary as the clips do."
    )


def noise_scale_during_training(
    model_name: str,
    train_set: TensorDataset,
    *,
    batch: int,
    lr: float,
    checkpoints,
    samples: int | None,
    groups: int | None = None,
    seed: int = 0,
    optimizer: str = "adam",
) -> dict:
    """The gradient noise scale at each of ``checkpoints`` (steps; 0 is the initial model) of a training
    run, measured on a seeded random ``samples`` of the clips (``data.take``: the clips are sorted by
    digit, so the first ones would be one or two digits and their gradients alike; None: every clip), in
    ``groups`` for a bootstrap interval when given, with the training loss there."""
    probe = take(train_set, samples, seed)
    torch.manual_seed(seed)
    model = build_model(model_name)
    updater = make_optimizer(optimizer, model.parameters(), lr)
    inputs, targets = train_set.tensors
    wanted, points = set(checkpoints), []
    chosen = epoch_batches(len(targets), batch, seed, max(max(wanted), 1))
    progress = tqdm(total=len(wanted), desc="noise scale", unit="checkpoint")  # the gradients take the time
    for step in range(max(wanted) + 1):
        if step:
            index = chosen[step - 1]
            updater.zero_grad(set_to_none=True)
            nn.functional.cross_entropy(model(inputs[index]), targets[index]).backward()
            updater.step()
        if step in wanted:
            loss, _ = evaluate(model, train_set)
            points.append({"step": step, "loss": loss,
                           **gradient_noise_scale(model, probe, groups=groups, seed=seed)})  # fmt: skip
            progress.update()
    progress.close()
    return {"points": points}


def stored_noise_scale(store, model_name: str, train_samples: int, **settings) -> dict:
    """``noise_scale_during_training`` through the results store. Without ``groups`` (None) the config
    leaves the key out: that is the measurement of the records written before intervals existed, and
    their keys still match it."""
    if settings.get("groups", 0) is None:
        del settings["groups"]
    config = {"kind": "noise_scale", "model": model_name, "train_samples": train_samples,
              "threads": torch.get_num_threads(), **settings}  # fmt: skip

    def measure() -> dict:
        train_set = take(load_fsdd().split("train"), train_samples, settings.get("seed", 0))
        return noise_scale_during_training(model_name, train_set, **settings)

    return store.measure(config, measure)


def critical_batch_table(records: list[dict]) -> pd.DataFrame:
    """Steps and samples to the target per learning-rate rule, seed and batch, from stored records."""
    rows = []
    for record in records:
        config, result = record["config"], record["result"]
        rows.append({"rule": config.get("rule"), "seed": config["seed"],
                     "global_batch": config["global_batch"], "lr": config["lr"], "steps": result["steps"],
                     "samples": result["samples"]})  # fmt: skip
    return pd.DataFrame(rows)


def critical_fits(table: pd.DataFrame) -> dict[str, dict]:
    """Per learning-rate rule, ``fit_critical_batch`` on the median steps over seeds of the batches that
    every seed took to the target (a rule with fewer than three such batches is left out)."""
    fits = {}
    for rule, rows in table.groupby("rule"):
        complete = rows.groupby("global_batch")["steps"].agg(
            lambda s: s.median() if s.notna().all() else None
        )
        complete = complete.dropna()
        if len(complete) >= 3:
            fits[rule] = fit_critical_batch(complete.index.to_numpy(), complete.to_numpy())
    return fits


def seed_envelope_fits(table: pd.DataFrame, rule) -> dict[str, dict]:
    """``fit_critical_batch`` of one learning-rate rule on the fewest and on the most steps over seeds at
    each batch every seed took to the target (``{"fewest": fit, "most": fit}``): how far the relation moves
    with the seed, the spread its predictions carry. Empty with fewer than three such batches."""
    rows = table[table["rule"] == rule]
    complete = rows.groupby("global_batch")["steps"].agg(["min", "max", lambda s: s.notna().all()])
    complete = complete[complete.iloc[:, 2].astype(bool)]
    if len(complete) < 3:
        return {}
    batches = complete.index.to_numpy()
    return {"fewest": fit_critical_batch(batches, complete["min"].to_numpy()),
            "most": fit_critical_batch(batches, complete["max"].to_numpy())}  # fmt: skip


def fit_position(b_crit: float, batches) -> str:
    """Where a fitted critical batch lies against the measured batches, in words for the chapter."""
    low, high = min(batches), max(batches)
    if not math.isfinite(b_crit):
        return f"no floor: the steps kept falling in proportion up to the largest batch measured ({high})"
    if b_crit > high:
        return f"beyond the largest batch measured ({high}), an extrapolation"
    if b_crit < low:
        return f"below the smallest batch measured ({low}), an extrapolation"
    return f"inside the measured range ({low}–{high})"


def resolved(points: pd.DataFrame) -> pd.Series:
    """Whether each checkpoint's noise scale is a value: below the n clips (``samples``) that resolve it.
    One at or above n (or infinite) is a lower bound only."""
    return points["b_simple"] < points["samples"]


def unresolved_checkpoints(points: pd.DataFrame) -> str:
    """How many checkpoints' noise scale is only a lower bound (``resolved``), as the prose counts them:
    "1 such checkpoint", "no such checkpoint"."""
    unresolved = int((~resolved(points)).sum())
    return "no such checkpoint" if unresolved == 0 else counted(unresolved, "such checkpoint")


def noise_against_critical(b_simple: float, b_crit: float) -> str:
    """How the noise scale compares with a fitted critical batch, as an order of magnitude in words:
    "within a factor of 2 of" (or 3: the whole number the ratio either way stays within), "12 times
    smaller than" or "5 times larger than"."""
    if not (math.isfinite(b_simple) and math.isfinite(b_crit)) or b_simple <= 0 or b_crit <= 0:
        return "not comparable with"
    ratio = b_crit / b_simple
    if 1 / 3 <= ratio <= 3:
        return f"within a factor of {max(2, math.ceil(max(ratio, 1 / ratio)))} of"
    return f"{ratio:.0f} times smaller than" if ratio > 3 else f"{1 / ratio:.0f} times larger than"


def warmup_note(table: pd.DataFrame, warmup_steps: int, rule: str = "linear") -> str:
    """The sentence saying that ``rule``'s largest batch reached the target within the warm-up (so it
    ran below its scaled learning rate nearly throughout); "" when it did not, or did not reach it."""
    largest = table["global_batch"].max()
    steps = table[(table["rule"] == rule) & (table["global_batch"] == largest)]["steps"]
    if steps.empty or steps.isna().any() or steps.median() > warmup_steps:
        return ""
    return (
        f"At batch {largest} the {rule} rule reaches the target by step {steps.median():.0f}, within "
        f"the {warmup_steps}-step warm-up, so that run spends nearly all its steps below its scaled "
        "learning rate."
    )


def steps_view(table: pd.DataFrame) -> pd.DataFrame:
    """Steps and samples to the target per global batch and rule, medians over seeds, as the chapter
    shows them ("–": some seed did not reach the target)."""
    rows = {}
    for (batch, rule), group in table.groupby(["global_batch", "rule"]):
        reached = group["steps"].notna().all()
        steps = f"{group['steps'].median():,.0f}" if reached else "–"
        samples = f"{group['samples'].median():,.0f}" if reached else "–"
        rows.setdefault(batch, {})[f"steps, {rule} rate"] = steps
        rows[batch][f"samples, {rule} rate"] = samples
    view = pd.DataFrame.from_dict(rows, orient="index").sort_index()
    view.index.name = "global batch"
    return view[sorted(view.columns, key=lambda c: (not c.startswith("steps"), c))]


def fits_view(fits: dict[str, dict], batches) -> pd.DataFrame:
    """``critical_fits`` as the chapter shows them: per rule the fitted floor of steps, the knee of the
    fixed recipe (not McCandlish's B_crit, which tunes the rate per batch), the least samples, and where
    the knee lies against the measured batches."""
    rows = []
    for rule, fit in fits.items():
        knee = fit["b_crit"]
        rows.append({"learning rate": rule, f"{S_MIN} (steps)": f"{fit['s_min']:,.0f}",
                     f"{B_KNEE} (samples)": f"{knee:,.0f}" if math.isfinite(knee) else "∞",
                     f"{E_MIN} (samples)": f"{fit['e_min']:,.0f}",
                     "the knee lies": _where(knee, batches)})  # fmt: skip
    return pd.DataFrame(rows).set_index("learning rate") if rows else pd.DataFrame()


def noise_view(points: pd.DataFrame, clips: int) -> pd.DataFrame:
    """The noise-scale checkpoints (``noise_points``) as the chapter shows them; a B_simple its n clips do
    not resolve (``resolved``) reads "> n", a lower bound, not a value. Points measured in groups get
    their bootstrap interval (``noise_interval``), "∞" where the draws bound it from below only; points
    probed on all ``clips`` training clips, those clips' own noise scale (``noise_points``' ``b_own``)."""
    estimates = zip(points["b_simple"], points["samples"], resolved(points), strict=True)
    view = pd.DataFrame(
        {
            "step": points["step"], "training loss": points["loss"].round(3),
            "tr(Σ)": points["trace_sigma"].round(3), "|G|²": points["gradient_norm2"].round(4),
            f"{B_SIMPLE} (samples)": [f"{b:,.0f}" if ok else f"> {n:,}" for b, n, ok in estimates],
        }
    ).set_index("step")  # fmt: skip
    if points["b_low"].notna().any():
        bounds = zip(points["b_low"], points["b_high"], strict=True)
        view["5–95 % interval (samples)"] = [interval_words(low, high) for low, high in bounds]
    if (points["samples"] == clips).all():
        view["the training clips' own (samples)"] = [f"{b:,.0f}" for b in points["b_own"]]
    return view


def interval_words(low: float, high: float) -> str:
    """A B_simple interval as the table and prose write it: "420–720", "420–∞" (bounded below only), "—"
    where nearly every draw leaves no mean gradient above the noise (no bound at all)."""
    if not math.isfinite(low):
        return "—"
    return f"{low:,.0f}–{high:,.0f}" if math.isfinite(high) else f"{low:,.0f}–∞"


def _where(b_crit: float, batches) -> str:
    """``fit_position`` in a table cell's few words."""
    if not math.isfinite(b_crit):
        return "no floor measured"
    return fit_position(b_crit, batches).split(",")[0]


RULE_WORDS = {"fixed": "with a fixed learning rate", "linear": "with a linearly scaled rate"}


def _knee(fit: dict | None, rule: str, batches, envelope: dict | None = None) -> str:
    words = RULE_WORDS.get(rule, f"with the {rule} rate")
    if fit is None:
        return f"{words}, fewer than three batches reached the target, too few to fit"
    if not math.isfinite(fit["b_crit"]):
        return f"{words}, {fit_position(fit['b_crit'], batches)}"
    spread = ""
    if envelope:  # the knee refitted to each batch's fewest and most steps over seeds
        knees = sorted(f["b_crit"] for f in envelope.values())
        numbers = ["no floor" if not math.isfinite(k) else f"{k:,.0f}" for k in knees]
        if numbers[0] != numbers[1]:  # one seed: its envelope is the fit itself
            spread = f" ({numbers[0]} to {numbers[1]} refitted to each batch's fewest and most steps over "
            spread += "seeds)"
    return f"\\(B\\) ≈ {fit['b_crit']:,.0f} {words}{spread}, {fit_position(fit['b_crit'], batches)}"


def batch_answer(fits: dict[str, dict], batches, rules=("fixed", "linear"), table=None) -> str:
    """The batch-size finding in one sentence, which reads before 6.3 defines the knee: where each recipe's
    knee lies, and, given the steps ``table`` (``critical_batch_table``), how far it moves refitted to the
    seeds' fewest and most steps."""
    envelopes = {r: seed_envelope_fits(table, r) for r in rules} if table is not None else {}
    knees = "; ".join(_knee(fits.get(r), r, batches, envelopes.get(r)) for r in rules)
    return f"Steps to the target stop falling in proportion to the batch near a knee: {knees}."


def closest_checkpoint(points: pd.DataFrame, target_loss: float, resolved_only: bool = False):
    """The checkpoint whose loss is closest to ``target_loss``, among those whose noise scale is resolved
    (``resolved``) when ``resolved_only``; None when there is none."""
    chosen = points[resolved(points)] if resolved_only else points
    if chosen.empty:
        return None
    return chosen.loc[(chosen["loss"] - target_loss).abs().idxmin()]


def noise_sentence(points: pd.DataFrame, target_loss: float, fits: dict[str, dict], clips: int) -> str:
    """The noise scale at the checkpoint closest to the target against the fitted knees, as sentences.
    Probed on all ``clips`` training clips, the knees are set against those clips' own noise scale, exact
    (``noise_points``' ``b_own``: the noise that batches drawn from them see), then B_simple with its
    interval, the estimate for the distribution they come from. Probed on fewer, B_simple (with its
    interval where one was measured) where its n clips resolve it, else the lower bound n (and the resolved
    checkpoint closest to the target, if any)."""
    near = closest_checkpoint(points, target_loss)
    samples = int(near["samples"])
    where = f"at step {int(near['step'])} (loss {float(near['loss']):.2f})"
    interval = "" if math.isnan(near["b_low"]) else (
        f" (5–95 % bootstrap interval {interval_words(near['b_low'], near['b_high'])})"
    )  # fmt: skip

    def against(value: float) -> str:
        parts = [
            f"{noise_against_critical(value, fit['b_crit'])} the {rule}-rate knee"
            for rule, fit in fits.items()
        ]
        return " and ".join(parts)

    if samples == clips:
        own = float(near["b_own"])
        sentence = (
            f"At the checkpoint closest to the target, {where}, the training clips' own noise scale, "
            f"tr(Σ)/|mean|² over all {clips:,} of them, is {own:,.0f}"
            + (f": as a rough guide, {against(own)}." if fits else ".")
        )
        estimate = (
            f"{float(near['b_simple']):,.0f}" if float(near["b_simple"]) < samples else f"above {samples:,}"
        )
        drawn = f"{B_SIMPLE} ≈ {estimate}{interval}"
        return sentence + f" For the distribution the clips are drawn from, the estimate is {drawn}."
    if float(near["b_simple"]) < samples:
        b_simple = float(near["b_simple"])
        sentence = (
            f"At the checkpoint closest to the target, {where}, {B_SIMPLE} ≈ {b_simple:,.0f}{interval}, "
            f"which its n = {samples:,} clips resolve ({samples / b_simple:.1f} times it)."
        )
        return sentence + (f" Against the knees, as a rough guide: {against(b_simple)}." if fits else "")
    sentence = (
        f"The checkpoint closest to the target, {where}, is not resolved: its noise scale is above "
        f"n = {samples:,} clips"
    )
    sentence += f", a lower bound already {against(samples)}." if fits else "."
    nearest = closest_checkpoint(points, target_loss, resolved_only=True)
    if nearest is not None:
        sentence += (
            f" The resolved checkpoint closest to it, at step {int(nearest['step'])} (loss "
            f"{float(nearest['loss']):.2f}), gives {B_SIMPLE} ≈ {float(nearest['b_simple']):,.0f}."
        )
    return sentence
