"""helpers.batchsize: learning-rate rules, the critical-batch fit, per-sample gradients and the noise
scale (against a plain autograd loop), and steps to a target on real clips."""

import math

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

from helpers import batchsize


def test_learning_rate_rules():
    assert batchsize.learning_rate(1e-3, 32, 128, "fixed") == 1e-3
    assert batchsize.learning_rate(1e-3, 32, 128, "linear") == pytest.approx(4e-3)
    with pytest.raises(ValueError, match="'fixed' or 'linear', not 'sqrt'"):
        batchsize.learning_rate(1e-3, 32, 128, "sqrt")


def test_the_fit_recovers_an_exact_critical_batch():
    batches = [8, 16, 32, 64, 128]
    steps = [100 * (1 + 32 / b) for b in batches]
    fit = batchsize.fit_critical_batch(batches, steps)
    assert fit["s_min"] == pytest.approx(100) and fit["b_crit"] == pytest.approx(32)
    assert fit["e_min"] == pytest.approx(3200)
    with pytest.raises(ValueError, match="three or more"):
        batchsize.fit_critical_batch([8, 16], [10, 5])
    assert batchsize.fit_critical_batch([8, 16, 32], [10, 10, 11])["b_crit"] == 0
    assert batchsize.fit_critical_batch([8, 16, 32], [80, 40, 20])["b_crit"] == math.inf


def test_a_batch_drawn_without_replacement_keeps_less_of_the_variance():
    assert batchsize.finite_population_factor(400, 256) == 144 / 399  # 0.36: the bias of 400 clips
    assert batchsize.finite_population_factor(2700, 256) == 2444 / 2699  # 0.91 on the training split
    assert batchsize.finite_population_factor(2700, 1) == 1.0
    assert batchsize.finite_population_factor(2700, 2700) == 0.0
    with pytest.raises(ValueError, match="exceeds the 10"):
        batchsize.finite_population_factor(10, 11)


def test_the_warmup_note_names_a_run_that_ends_inside_its_warmup():
    table = pd.DataFrame({"rule": ["linear"] * 3 + ["fixed"] * 3, "global_batch": [8, 128, 256] * 2,
                          "steps": [160, 20, 10, 180, 60, 50]})  # fmt: skip
    assert batchsize.warmup_note(table, 10).startswith(
        "At batch 256 the linear rule reaches the target by step 10"
    )
    assert batchsize.warmup_note(table, 5) == ""
    assert batchsize.warmup_note(table.assign(steps=[160, 20, None] * 2), 10) == ""


def test_views_read_with_units_and_say_what_is_not_resolved():
    table = pd.DataFrame({"rule": ["fixed", "fixed", "linear", "linear"], "seed": [0, 1, 0, 1],
                          "global_batch": [8, 8, 8, 8], "steps": [100, 120, 100, None],
                          "samples": [800, 960, 800, None]})  # fmt: skip
    steps = batchsize.steps_view(table)
    assert steps.loc[8, "steps, fixed rate"] == "110" and steps.loc[8, "samples, fixed rate"] == "880"
    assert steps.loc[8, "steps, linear rate"] == "–"  # one seed did not reach the target
    fits = batchsize.fits_view({"fixed": {"s_min": 50.0, "b_crit": 12.4, "e_min": 620.0}}, [8, 256])
    assert fits.loc["fixed"].tolist() == ["50", "12", "620", "inside the measured range (8–256)"]
    points = pd.DataFrame({"step": [0, 100], "loss": [2.3, 2.2], "trace_sigma": [3.0, 3.0],
                           "gradient_norm2": [0.1, 0.001], "b_simple": [30.0, 3000.0], "samples": 256,
                           "b_low": math.nan, "b_high": math.nan, "groups": None})  # fmt: skip
    view = batchsize.noise_view(points, 2700)
    assert (
        view[r"\(B_{\text{simple}}\) (samples)"].tolist() == ["30", "> 256"] and len(view.columns) == 4
    )  # no interval
    grouped = points.assign(samples=2700, b_low=[20.0, math.inf], b_high=[41.0, math.inf], groups=50,
                            b_own=[25.0, 2900.0])  # fmt: skip
    view = batchsize.noise_view(grouped, 2700)
    assert view["5–95 % interval (samples)"].tolist() == ["20–41", "—"]  # "—": no draw bounds it at all
    assert view[r"\(B_{\text{simple}}\) (samples)"].tolist() == ["30", "> 2,700"]
    assert view["the training clips' own (samples)"].tolist() == ["25", "2,900"]  # all of them probed
    assert batchsize.interval_words(1800.0, math.inf) == "1,800–∞"


def test_the_base_batch_trains_once_for_every_rule(tmp_path, monkeypatch):
    from helpers.results import ResultStore

    calls = []

    def fake(model_name, train_set, *, global_batch, lr, **settings):
        calls.append((global_batch, lr))
        return {"steps": 10 * len(calls), "samples": None, "history": []}

    monkeypatch.setattr(batchsize, "steps_to_target", fake)
    monkeypatch.setattr(batchsize, "take", lambda dataset, samples, seed: None)
    monkeypatch.setattr(batchsize, "load_fsdd", lambda: type("F", (), {"split": lambda self, name: None})())
    store = ResultStore("test", root=tmp_path, hardware={"cpu_model": "test"})
    records = batchsize.stored_critical_batch(
        store, "LinearNet", 20, rules=["fixed", "linear"], seeds=[0], batches=[8, 16], base_lr=1e-3,
        target_loss=2.0, max_steps=5,
    )  # fmt: skip
    assert calls == [(8, 1e-3), (16, 1e-3), (16, 2e-3)]  # batch 8: one run for both rules
    assert [r["config"]["rule"] for r in records] == ["fixed", "linear", "fixed", "linear"]
    assert records[0]["result"] == records[1]["result"] and records[1]["config"]["lr"] == 1e-3


def tiny_problem():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 4), nn.Tanh(), nn.Linear(4, 3))
    data = TensorDataset(torch.randn(9, 5), torch.randint(0, 3, (9,)))
    return model, data


def loop_gradients(model, data):
    """Each sample's gradient by one backward pass per sample: the slow, plain way."""
    rows = []
    for x, y in zip(*data.tensors, strict=True):
        model.zero_grad()
        nn.functional.cross_entropy(model(x[None]), y[None]).backward()
        rows.append(torch.cat([p.grad.reshape(-1) for p in model.parameters()]))
    return torch.stack(rows)


def test_the_fit_is_placed_against_the_measured_batches():
    assert batchsize.fit_position(16.1, [8, 256]) == "inside the measured range (8–256)"
    assert batchsize.fit_position(393.0, [8, 256]).startswith("beyond the largest batch measured (256)")
    assert batchsize.fit_position(2.0, [8, 256]).startswith("below the smallest batch measured (8)")
    assert batchsize.fit_position(math.inf, [8, 256]).startswith("no floor")


def test_the_noise_scale_is_compared_in_orders_of_magnitude():
    assert batchsize.noise_against_critical(10.0, 25.0) == "within a factor of 3 of"
    assert batchsize.noise_against_critical(341.0, 627.0) == "within a factor of 2 of"  # 1.84
    assert batchsize.noise_against_critical(100.0, 100.0) == "within a factor of 2 of"
    assert batchsize.noise_against_critical(1.4, 16.8) == "12 times smaller than"
    assert batchsize.noise_against_critical(100.0, 20.0) == "5 times larger than"
    assert batchsize.noise_against_critical(math.inf, 20.0) == "not comparable with"


def test_per_sample_gradients_equal_one_backward_per_sample():
    model, data = tiny_problem()
    fast = batchsize.per_sample_gradients(model, *data.tensors)
    torch.testing.assert_close(fast, loop_gradients(model, data))


def test_noise_scale_is_trace_of_covariance_over_squared_mean_norm():
    model, data = tiny_problem()
    g = loop_gradients(model, data).double()
    mean = g.mean(0)
    trace = float(g.var(0, unbiased=True).sum())
    signal = float(mean @ mean) - trace / len(g)
    result = batchsize.gradient_noise_scale(model, data, chunk=4)  # chunks of 4, 4, 1
    assert result["trace_sigma"] == pytest.approx(trace, rel=1e-6)
    assert result["gradient_norm2"] == pytest.approx(signal, rel=1e-6)
    assert result["b_simple"] == pytest.approx(trace / signal, rel=1e-6)


def test_groups_keep_the_estimate_and_the_gram_matrix_of_their_sums():
    """Dealt into groups, the same clips give the same estimate (to float32 rounding), and the stored
    counts, squares and Gram matrix are those of each group's own gradients, computed one backward at a
    time; the groups are a seeded random partition of every clip."""
    model, data = tiny_problem()
    plain = batchsize.gradient_noise_scale(model, data, chunk=4)
    grouped = batchsize.gradient_noise_scale(model, data, chunk=2, groups=3, seed=5)
    for key in ("trace_sigma", "gradient_norm2", "b_simple"):
        assert grouped[key] == pytest.approx(plain[key], rel=1e-6)  # float32 gradients, other blocks
    order = torch.randperm(9, generator=torch.Generator().manual_seed(5))
    g = loop_gradients(model, data).double()
    sums = torch.stack([g[part].sum(0) for part in torch.tensor_split(order, 3)])  # float64, plain
    stats = grouped["groups"]
    assert stats["samples"] == [3, 3, 3]
    parts = torch.tensor_split(order, 3)
    assert stats["squares"] == pytest.approx([float((g[part] ** 2).sum()) for part in parts], rel=1e-6)
    torch.testing.assert_close(
        torch.tensor(stats["gram"], dtype=torch.float64), sums @ sums.T, rtol=1e-5, atol=1e-9
    )
    # the bootstrap's draw that takes every group once is the estimate itself
    counts, squares, gram = (np.asarray(stats[k]) for k in ("samples", "squares", "gram"))
    trace, signal = batchsize.noise_terms(counts.sum(), squares.sum(), gram.sum() / counts.sum() ** 2)
    assert trace / signal == pytest.approx(plain["b_simple"], rel=1e-6)
    with pytest.raises(ValueError, match="groups must be between 2 and the 9 samples, not 10"):
        batchsize.gradient_noise_scale(model, data, groups=10)


def test_the_noise_interval_resamples_the_groups_its_estimate_comes_from():
    # every group alike: whatever the draw, the same sums, so the interval is the estimate exactly.
    # 4 groups of 5 clips, squares 10 and Gram 4 throughout: n = 20, Σq = 40, |ΣS|² = 16 · 4 = 64, so
    # |mean|² = 64/400 = 0.16, tr(Σ) = (40 − 20 · 0.16)/19 = 36.8/19 and |G|² = 0.16 − tr(Σ)/20
    alike = {"groups": {"samples": [5] * 4, "squares": [10.0] * 4, "gram": [[4.0] * 4] * 4}}
    trace = 36.8 / 19
    estimate = trace / (0.16 - trace / 20)
    assert batchsize.noise_interval(alike) == pytest.approx((estimate, estimate), rel=1e-12)
    assert all(math.isnan(end) for end in batchsize.noise_interval({"b_simple": 3.0}))  # no groups
    # a mean gradient at the noise floor (B_simple = 2n, simulated): some draws leave no |G|² above the
    # noise, so the data bound B_simple from below only
    low, high = batchsize.noise_interval(simulated_point(np.random.default_rng(3), 2 * 540))
    assert math.isfinite(low) and high == math.inf
    point = {"step": 0, "loss": 2.3, "samples": 20, "trace_sigma": trace, "gradient_norm2": 0.16 - trace / 20,
             "b_simple": estimate, **alike}  # fmt: skip
    points = batchsize.noise_points({"result": {"points": [point]}})
    assert points.loc[0, ["b_low", "b_high", "groups"]].tolist() == pytest.approx([estimate, estimate, 4])
    assert "groups" in points.columns and "gram" not in points.columns
    # the 20 clips' own noise scale: tr(Σ) with divisor n, (36.8/19)(19/20) = 1.84, over |mean|² = 0.16
    assert points.loc[0, "b_own"] == pytest.approx(11.5, rel=1e-12)


def simulated_point(generator, b_simple: float, clips: int = 540, groups: int = 20, size: int = 64) -> dict:
    """A checkpoint's groups as ``gradient_noise_scale`` stores them, from per-sample gradients drawn with a
    known noise scale: Σ the identity in ``size`` dimensions (tr(Σ) = size), G along one axis with
    |G|² = size / ``b_simple``."""
    gradients = generator.normal(size=(clips, size))
    gradients[:, 0] += math.sqrt(size / b_simple)
    parts = np.split(generator.permutation(clips), groups)
    sums = np.stack([gradients[part].sum(0) for part in parts])
    return {"groups": {"samples": [len(part) for part in parts],
                       "squares": [float((gradients[part] ** 2).sum()) for part in parts],
                       "gram": (sums @ sums.T).tolist()}}  # fmt: skip


def test_the_noise_interval_holds_a_known_noise_scale_about_as_often_as_it_says():
    """Seeded, so it cannot flake: 200 simulated checkpoints with B_simple = n/8 (the cpu run's step 200 has
    341 of 2,700). The recentred 90 % intervals hold it in 182 (91 %); the draws left uncentred, round
    tr(Σ)/|mean|², held it in 134 (67 %; in a simulation of the cpu run's size, 61 %)."""
    generator = np.random.default_rng(7)
    held = 0
    for _ in range(200):
        low, high = batchsize.noise_interval(simulated_point(generator, 540 / 8), resamples=1000)
        held += low <= 540 / 8 <= high
    assert 0.84 <= held / 200 <= 0.96


def test_a_noise_scale_without_groups_keeps_the_key_of_the_records_measured_before_intervals(tmp_path):
    from helpers.results import ResultStore

    store = ResultStore("noise", root=tmp_path, hardware={"cpu": "test"}, code="v")
    configs = []
    store.measure = lambda config, function: configs.append(config)
    common = {"batch": 32, "lr": 5e-4, "checkpoints": [0, 200], "samples": 256, "optimizer": "adam"}
    batchsize.stored_noise_scale(store, "LinearNet", None, groups=None, **common)
    batchsize.stored_noise_scale(store, "LinearNet", None, groups=50, **common)
    assert "groups" not in configs[0] and configs[1]["groups"] == 50
    assert {k: v for k, v in configs[1].items() if k != "groups"} == configs[0]


def test_steps_to_target_on_real_clips(fsdd):
    from helpers.data import take

    train_set = take(fsdd.split("train"), 20, 0)
    reached = batchsize.steps_to_target("LinearNet", train_set, global_batch=10, lr=1e-3, target_loss=2.0,
                                        max_steps=60, eval_every=5, warmup_steps=5)  # fmt: skip
    assert reached["steps"] is not None and reached["steps"] % 5 == 0
    assert reached["samples"] == reached["steps"] * 10 and reached["history"][-1]["loss"] <= 2.0
    never = batchsize.steps_to_target("LinearNet", train_set, global_batch=10, lr=1e-3, target_loss=1e-9,
                                      max_steps=10, eval_every=5)  # fmt: skip
    assert never["steps"] is None and len(never["history"]) == 2


def test_the_noise_scale_probe_spans_the_digits(fsdd):
    """The clips are sorted by digit: the probe must be a random subset, not the first clips."""
    from helpers.data import take
    from helpers.models import build_model

    train_set = take(fsdd.split("train"), 60, 0)
    probe = take(train_set, 12, 3)
    assert len(set(probe.tensors[1].tolist())) > 6 and len(set(train_set.tensors[1][:12].tolist())) <= 3
    during = batchsize.noise_scale_during_training("ConvNet", train_set, batch=6, lr=1e-3, checkpoints=[0],
                                                   samples=12, seed=3)  # fmt: skip
    torch.manual_seed(3)
    expected = batchsize.gradient_noise_scale(build_model("ConvNet"), probe)
    assert during["points"][0]["b_simple"] == pytest.approx(expected["b_simple"], rel=1e-9)


def test_the_batch_answer_places_each_knee():
    fits = {"fixed": {"s_min": 56.0, "b_crit": 61.4, "e_min": 3438.0},
            "linear": {"s_min": 15.0, "b_crit": math.inf, "e_min": 3800.0}}  # fmt: skip
    assert batchsize.batch_answer(fits, [8, 256]) == (
        "Steps to the target stop falling in proportion to the batch near a knee: \\(B\\) ≈ 61 with a fixed "
        "learning rate, inside the measured range (8–256); with a linearly scaled rate, no floor: the steps "
        "kept falling in proportion up to the largest batch measured (256)."
    )
    # two seeds: fewest 70/40/30 and most 90/50/30 steps at 8/32/128; the knee E_min/S_min of each fit
    table = pd.DataFrame({"rule": "fixed", "seed": [0, 0, 0, 1, 1, 1], "global_batch": [8, 32, 128] * 2,
                          "steps": [70, 40, 30, 90, 50, 30]})  # fmt: skip
    knees = sorted(f["b_crit"] for f in batchsize.seed_envelope_fits(table, "fixed").values())
    said = batchsize.batch_answer(fits, [8, 256], rules=("fixed",), table=table)
    assert (
        f"\\(B\\) ≈ 61 with a fixed learning rate ({knees[0]:,.0f} to {knees[1]:,.0f} refitted to each "
        "batch's fewest and " in said
    )
    unfitted = batchsize.batch_answer(fits | {"linear": None}, [8, 256])
    assert "with a linearly scaled rate, fewer than three batches reached the target" in unfitted


def test_the_noise_sentence_gives_a_value_or_a_lower_bound():
    points = pd.DataFrame({"step": [0, 100, 200], "loss": [2.30, 2.25, 2.19], "samples": 256,
                           "b_simple": [40.0, 20.0, 400.0], "b_low": math.nan,
                           "b_high": math.nan})  # fmt: skip
    fits = {"fixed": {"b_crit": 60.0}, "linear": {"b_crit": 600.0}}
    # step 200 is closest to 2.2, but 256 clips do not resolve 400: a lower bound, 256/60 = 4.3 × the knee
    assert batchsize.noise_sentence(points, 2.2, fits, 2700) == (
        "The checkpoint closest to the target, at step 200 (loss 2.19), is not resolved: its noise scale "
        "is above n = 256 clips, a lower bound already 4 times larger than the fixed-rate knee and within "
        "a factor of 3 of the linear-rate knee. The resolved checkpoint closest to it, at step 100 (loss "
        r"2.25), gives \(B_{\text{simple}}\) ≈ 20."
    )
    assert int(batchsize.closest_checkpoint(points, 2.2, resolved_only=True)["step"]) == 100
    assert batchsize.closest_checkpoint(points.assign(samples=16), 2.2, resolved_only=True) is None
    # 1,000 clips resolve 400: 2.5 times the estimate
    assert batchsize.noise_sentence(points.assign(samples=1000), 2.2, {"fixed": {"b_crit": 60.0}}, 2700) == (
        r"At the checkpoint closest to the target, at step 200 (loss 2.19), \(B_{\text{simple}}\) ≈ 400, "
        "which its n = 1,000 clips resolve (2.5 times it). Against the knees, as a rough guide: 7 times "
        "larger than the fixed-rate knee."
    )
    # 1,000 clips of 2,700 with an interval
    sampled = points.assign(samples=1000, b_low=[30.0, 15.0, 310.0], b_high=[50.0, 26.0, 530.0])
    assert batchsize.noise_sentence(sampled, 2.2, {"fixed": {"b_crit": 60.0}}, 2700).startswith(
        r"At the checkpoint closest to the target, at step 200 (loss 2.19), \(B_{\text{simple}}\) ≈ 400 "
        "(5–95 % bootstrap interval 310–530), which its n = 1,000 clips resolve (2.5 times it)."
    )
    # every clip: the knees are set against the clips' own noise scale, 350 = 5.8 times 60, exact; then
    # the estimate for the distribution they are drawn from, with its interval
    every = sampled.assign(samples=2700, b_own=[35.0, 18.0, 350.0])
    assert batchsize.noise_sentence(every, 2.2, {"fixed": {"b_crit": 60.0}}, 2700) == (
        "At the checkpoint closest to the target, at step 200 (loss 2.19), the training clips' own noise "
        "scale, tr(Σ)/|mean|² over all 2,700 of them, is 350: as a rough guide, 6 times larger than the "
        "fixed-rate knee. For the distribution the clips are drawn from, the estimate is "
        r"\(B_{\text{simple}}\) ≈ 400 (5–95 % bootstrap interval 310–530)."
    )


def test_the_probe_and_the_interval_are_described_as_measured():
    points = pd.DataFrame({"samples": [2700, 2700], "groups": [50, 50]})
    assert batchsize.probe_words(points, 2700) == "all 2,700 training clips (n = 2,700)"
    assert batchsize.probe_words(points.assign(samples=256), 2700) == (
        "256 of the 2,700 training clips, drawn at random (n = 256)"
    )
    assert "dealt at random into 50 groups (54 clips each), and 2,000 draws" in batchsize.interval_note(
        points
    )
    assert "(5 or 6 clips each)" in batchsize.interval_note(points.assign(samples=16, groups=3))
    assert batchsize.interval_note(points.assign(groups=None)).startswith(
        "This run kept no per-group sums, so its estimates have no interval"
    )
