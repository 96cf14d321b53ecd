"""helpers.ddp_bounds: the most a bucket size or a compression can change a step, and how it reads."""

import pytest
from test_ddp_results import launches

from helpers import ddp_bounds

CONV_BYTES = 1_504_800  # ConvNet's float32 gradients: its parameters x 4


def test_the_alpha_beta_all_reduce_of_buckets_one_after_the_other():
    fit = {"alpha_seconds": 1e-4, "seconds_per_byte": 1e-9}
    # two ranks: each bucket 2(k-1)(α + nβ/k) = 2α + nβ: 2e-4 + 400e-9, then 2e-4 + 4,000e-9
    assert ddp_bounds.modelled_allreduce_seconds([400, 4000], 2, fit) == pytest.approx(4.044e-4)
    assert ddp_bounds.modelled_allreduce_seconds([400], 1, fit) == 0


def compression_runs(candidate_medians, compressed_allreduce=0.03, buckets=2):
    """LinearNet's gradients in ``buckets`` equal buckets, uncompressed and in bf16 (two: they can overlap
    the backward pass, so the bound is each side's whole all-reduce)."""
    none = launches({"compression": None}, [0.30, 0.31, 0.29], allreduce=[0.05] * 3,
                    buckets=[48_408_880 // buckets] * buckets)  # fmt: skip
    bf16 = launches({"compression": "bf16"}, candidate_medians, allreduce=[compressed_allreduce] * 3,
                    buckets=[24_204_440 // buckets] * buckets)  # fmt: skip
    return none + bf16


FIT = {"alpha_seconds": 0.0, "seconds_per_byte": 1e-9}


def bound_of(candidate_medians, compressed_allreduce=0.03, buckets=2):
    runs = compression_runs(candidate_medians, compressed_allreduce, buckets)
    return ddp_bounds.communication_bound(runs, {"compression": None}, {"compression": "bf16"}, FIT)


def test_compression_saves_at_most_the_all_reduce_it_changes_less_the_other_side_s_tail():
    bound = bound_of([0.28, 0.29, 0.27])
    # α-β, two ranks: 48,408,880 B x 1 ns = 48.4 ms, halved to 24.2 ms; the hook timed 50 and 30 ms
    assert bound["model_seconds"] == pytest.approx([0.04840888, 0.02420444])
    assert bound["expected_seconds"] == pytest.approx(0.02420444)
    assert bound["hook_seconds"] == pytest.approx([0.05, 0.03])
    # the tails, which no computation hides: the hook's 25 and 15 ms after the last gradient, the model's
    # last bucket alone, half of each all-reduce (24.2 and 12.1 ms)
    assert bound["exposed_seconds"] == pytest.approx([0.025, 0.015])
    assert bound["model_tail_seconds"] == pytest.approx([0.02420444, 0.01210222])
    # saved: the old whole less the new tail, 50 - 15 = 35 (hook) or 48.4 - 12.1 = 36.3 ms (model); lost:
    # the new whole less the old tail, 30 - 25 = 5 (hook) or 24.2 - 24.2 = 0 ms (model). A compression's
    # bound is the hook's, which holds the conversions; the model's bytes alone are kept beside it
    assert bound["most_saved"] == pytest.approx(0.035)
    assert bound["most_lost"] == pytest.approx(0.005) and bound["waits"] == [False, False]
    assert bound["model_most_saved"] == pytest.approx(0.04840888 - 0.01210222)
    assert bound["model_most_lost"] == pytest.approx(0.0, abs=1e-12)
    assert bound["saved_seconds"] == pytest.approx(0.30 - 0.28) and bound["buckets"] == [2, 2]
    # launch medians 0.29-0.31 against 0.27-0.29: speed-ups from 0.29/0.29 = 1 to 0.31/0.27 = 1.148, so
    # at the baseline's 0.30 s between 0 and 0.30 x (1 - 0.27/0.31) = 38.7 ms saved: not resolved
    assert bound["saved_low"] == pytest.approx(0.0, abs=1e-12)
    assert bound["saved_high"] == pytest.approx(0.30 * (1 - 0.27 / 0.31))
    summary = ddp_bounds.bound_summary("bf16 against none", bound)
    assert summary == (
        "bf16 against none: not resolved, 1.07× (1.00–1.15×, 3 launches each); between 0 and 38.7 ms saved "
        "per step; it can move a step by at most 35.0 ms saved or 5.00 ms lost, as the hook timed it, "
        "conversions included (the α-β model, bytes alone, puts that most at 36.3 ms saved or 0 ms lost)."
    )
    # the answer box's clause: the same verdict, its interval left to the summary
    assert ddp_bounds.bound_brief("bf16 against none", bound) == (
        "bf16 against none: not resolved, 1.07× (1.00–1.15×)"  # an unresolved interval stays
    )
    assert ddp_bounds.bound_sentence("bf16 against none", bound) == summary + (
        " The all-reduce it changes, timed in the hook, the conversions to and from bf16 included, went from "
        "50.0 to 30.0 ms per step (25.0 to 15.0 ms of it after the backward pass's last gradient); the α-β "
        "model has 48.4 to 24.2 ms (24.2 to 12.1 ms for the last bucket, which no computation can hide)."
    )
    assert ddp_bounds.bound_limits(bound).startswith("at most 35.0 ms saved or 5.00 ms lost, as the hook")
    table = ddp_bounds.bound_table({"bf16": bound})
    assert table.loc["all-reduce in flight, timed in the hook (ms)", "bf16"] == "50.0 → 30.0"
    assert table.loc["of it after backward's last gradient (ms)", "bf16"] == "25.0 → 15.0"
    assert table.loc["of it, the last bucket alone (ms)", "bf16"] == "24.2 → 12.1"
    assert table.loc["most it can save (ms)", "bf16"] == "35.0"
    assert table.loc["most it can cost (ms)", "bf16"] == "5.00"
    # savings and costs in words, never a negative saving; the step in ms like every table of the chapter
    assert table.loc["measured per step, interval (ms)", "bf16"] == "0 to 38.7 saved"
    assert table.loc["measured per step, medians (ms)", "bf16"] == "20.0 saved"
    assert table.loc["α-β model, if nothing overlaps (ms)", "bf16"] == "24.2 saved"
    assert table.loc["step time (ms)", "bf16"] == "300 → 280"
    assert ddp_bounds.saved_words(-0.00281) == "2.81 lost" and ddp_bounds.saved_words(0.0) == "0"
    assert ddp_bounds.saved_range(-0.0868, 0.0113) == "86.8 lost to 11.3 saved"
    assert ddp_bounds.saved_range(-0.009, -0.005) == "5.00 to 9.00 lost"


def test_with_one_bucket_nothing_overlaps_and_only_the_difference_can_show():
    one = bound_of([0.28, 0.29, 0.27], buckets=1)
    # a side with one bucket is all tail: the hook's 50 → 30 ms saves 20 ms (the model's 48.4 → 24.2 ms
    # would save 24.2 ms, but leaves the conversions out), and nothing can be lost
    assert one["buckets"] == [1, 1]
    assert one["most_saved"] == pytest.approx(0.02) and one["most_lost"] == 0.0
    assert ddp_bounds.bound_limits(one).startswith("at most 20.0 ms saved or 0 ms lost")
    # conversions that make the hook slower (50 → 60 ms) are what bf16 can cost, and it can save nothing
    dearer = bound_of([0.30, 0.31, 0.29], compressed_allreduce=0.06, buckets=1)
    assert dearer["most_lost"] == pytest.approx(0.01) and dearer["most_saved"] == 0.0


def test_a_resolved_difference_beyond_the_bound_is_not_the_all_reduce_s_doing():
    slower = bound_of([0.40, 0.41, 0.39])
    # speed-ups 0.29/0.41 = 0.707 to 0.31/0.39 = 0.795, all below 1: at 0.30 s, 0.30 x (1 - 0.41/0.29) =
    # -124 ms to 0.30 x (1 - 0.39/0.31) = -77.4 ms, beyond the 5 ms the bf16 all-reduce can add; said as
    # the time taken: 0.40/0.30 = 1.33 as long, 0.39/0.31 = 1.26 to 0.41/0.29 = 1.41
    assert ddp_bounds.bound_summary("bf16", slower) == (
        "bf16: slower, taking 1.33× as long (1.26–1.41×, 3 launches each); 100 ms lost per step (between "
        "77.4 and 124 ms lost); it can move a step by at most 35.0 ms saved or 5.00 ms lost, as the hook "
        "timed it, conversions included (the α-β model, bytes alone, puts that most at 36.3 ms saved or 0 "
        "ms lost), so that difference is more than it can explain."
    )
    faster = bound_of([0.10, 0.11, 0.09])  # 200 ms saved against a 50 ms all-reduce
    assert faster["saved_low"] > faster["most_saved"]
    assert ddp_bounds.bound_summary("bf16", faster).endswith(
        "so that difference is more than it can explain."
    )


def test_a_median_beyond_the_bound_inside_an_interval_that_reaches_it_says_the_all_reduce_is_part():
    """Chapter 3's bf16 (issue 37, 13): faster, 8.65 ms saved (0.97–12.9), the hook 2.8 ms shorter."""
    part = bound_of([0.28, 0.285, 0.275], compressed_allreduce=0.04, buckets=1)
    # hook 50 → 40 ms, one bucket: at most 10 ms saved; launches 0.29-0.31 against 0.275-0.285: speed-ups
    # 0.29/0.285 = 1.0175 to 0.31/0.275 = 1.127, at 0.30 s 5.16 to 33.9 ms saved; the median 20 ms
    assert part["most_saved"] == pytest.approx(0.01)
    assert part["saved_low"] < part["most_saved"] < part["saved_seconds"]
    assert ddp_bounds.bound_summary("bf16", part).endswith(
        ": the median, 20.0 ms, is more than the 10.0 ms it can save, so the all-reduce explains at most "
        "part of that difference."
    )


def test_what_the_hook_and_the_model_say_together_about_compression():
    # the model halves the all-reduce (48.4 → 24.2 ms); the hook, conversions included, does not shorten
    # it (50 → 50 ms: within 10 %) or lengthens it (50 → 60 ms)
    same = ddp_bounds.bound_sentence("bf16", bound_of([0.30, 0.31, 0.29], compressed_allreduce=0.05))
    assert same.endswith(
        "So bf16 left the hook-timed all-reduce as it was, where its fewer bytes take 50 % off in the model: "
        "the conversions took what they saved."
    )
    # chapter 3's case: 34.1 → 31.3 ms is 8 % shorter, inside 10 %, and said so, not "did not shorten"
    shorter = ddp_bounds.bound_sentence("bf16", bound_of([0.30, 0.31, 0.29], compressed_allreduce=0.046))
    assert "So bf16 shortened the hook-timed all-reduce by only 8 % (4.00 ms), where" in shorter
    # 50 → 54 ms: 8 % longer, inside 10 %, and the conversions cost more than all the bytes saved
    longer_inside = ddp_bounds.bound_sentence(
        "bf16", bound_of([0.30, 0.31, 0.29], compressed_allreduce=0.054)
    )
    assert (
        "So bf16 lengthened the hook-timed all-reduce by 8 % (4.00 ms), where its fewer bytes take 50 % "
        in (longer_inside)
    )
    assert longer_inside.endswith("here the conversions cost more than the bytes saved.")
    longer = ddp_bounds.bound_sentence("bf16", bound_of([0.30, 0.31, 0.29], compressed_allreduce=0.06))
    assert "So bf16 lengthened the hook-timed all-reduce" in longer
    # launch medians 0.29-0.31 on both sides: 0.30 x (1 - 0.31/0.29) = -20.7 to +19.4 ms, inside the 50 ms
    # it could save and the 60 ms it could cost
    assert "reaches beyond" not in longer
    noisy = ddp_bounds.bound_sentence("bf16", bound_of([0.10, 0.30, 0.60], compressed_allreduce=0.02))
    # speed-ups 0.29/0.60 to 0.31/0.10: at 0.30 s from 321 ms lost to 203 ms saved, beyond both the 40 ms
    # it could save (the hook's 50 ms less the new 10 ms tail) and the 0 ms it could cost (the model's
    # 24.2 ms less the old 24.2 ms tail; the hook's 20 ms less 25)
    assert noisy.endswith(
        "The launches' interval reaches beyond what the setting can change both ways: their spread is "
        "larger than anything this setting could do, so they cannot show its effect."
    )


def test_chapter_bounds_compare_each_setting_with_the_default():
    fit = {"alpha_seconds": 0.0, "seconds_per_byte": 1e-9}
    caps = launches({"model": "ConvNet", "bucket_cap_mb": 25}, [1.0] * 3, allreduce=[0.002] * 3) + launches(
        {"model": "ConvNet", "bucket_cap_mb": 0.25}, [1.0] * 3, allreduce=[0.003] * 3, buckets=[60, 40]
    )
    compressed = [({**v, "model": "LinearNet"}, r) for v, r in compression_runs([0.3] * 3)]
    bounds = ddp_bounds.chapter_bounds({"buckets": caps, "compression": compressed}, fit)
    assert list(bounds) == ["bf16 against none, LinearNet", "0.25 MiB buckets against 25 MiB, ConvNet"]
    assert bounds["0.25 MiB buckets against 25 MiB, ConvNet"]["buckets"] == [1, 2]
    # the table's columns are headed as their arrows run, baseline → candidate
    table = ddp_bounds.bound_table(bounds)
    assert table.columns.tolist() == ["none → bf16, LinearNet", "25 MiB → 0.25 MiB buckets, ConvNet"]
    assert table.loc["buckets per step", "25 MiB → 0.25 MiB buckets, ConvNet"] == "1 → 2"


def test_a_bound_that_is_mostly_waiting_for_backward_passes_says_so():
    # 0.25 MiB buckets against one 25 MiB bucket on four ranks sharing one GPU (the gpu edition's ConvNet):
    # the hook has 2.33 ms in flight, all of it tail, then 25.3 ms, 1.69 ms of it after the last gradient;
    # chapter 4's fit (α = 234 µs, 1.93 GB/s) has 6(α + nβ/4): 2.57 ms for the one bucket, 5.38 ms for the
    # three, 1.44 ms for the last (40,320 B) alone
    base = launches({"bucket_cap_mb": 25}, [0.0407] * 3, allreduce=[0.00233] * 3, buckets=[CONV_BYTES],
                    world_size=4)  # fmt: skip
    small = launches({"bucket_cap_mb": 0.25}, [0.0400] * 3, allreduce=[0.0253] * 3,
                     buckets=[804_440, 660_040, 40_320], world_size=4)  # fmt: skip
    for _, rec in small:
        rec["result"]["exposed_allreduce_seconds_all"] = [0.00169] * 3
    for _, rec in base:
        rec["result"]["exposed_allreduce_seconds_all"] = [0.00233] * 3
    fit = {"alpha_seconds": 234e-6, "seconds_per_byte": 1 / 1.93e9}
    bound = ddp_bounds.communication_bound(base + small, {"bucket_cap_mb": 25}, {"bucket_cap_mb": 0.25}, fit)
    assert bound["model_seconds"] == pytest.approx([6 * (234e-6 + CONV_BYTES / 4 / 1.93e9),
                                                    6 * (3 * 234e-6 + CONV_BYTES / 4 / 1.93e9)])  # fmt: skip
    tail = 6 * (234e-6 + 40_320 / 4 / 1.93e9)
    assert bound["model_tail_seconds"] == pytest.approx([bound["model_seconds"][0], tail])
    # saved: the one bucket's whole less the new tail, 2.33 - 1.69 = 0.64 (hook) or 2.57 - 1.44 = 1.14 ms
    # (model); lost: 25.3 - 2.33 = 23.0 (hook, mostly waiting) or 5.38 - 2.57 = 2.81 ms (model)
    assert bound["most_saved"] == pytest.approx(bound["model_seconds"][0] - tail)
    assert bound["waits"] == [False, True] and bound["most_lost"] == pytest.approx(0.0253 - 0.00233)
    assert ddp_bounds.bound_limits(bound) == (
        "at most 1.14 ms saved or 23.0 ms lost (the hook's time in flight, mostly waiting for backward "
        "passes, not communication: a loose bound)"
    )
    table = ddp_bounds.bound_table({"buckets": bound})
    assert table.loc["most it can cost (ms)", "buckets"] == "23.0 (loose: mostly waiting)"  # said below
    assert table.loc["most it can save (ms)", "buckets"] == "1.14"
    # 1.44 with α rounded to 234 µs (the edition's unrounded fit gives 1.43)
    assert table.loc["of it, the last bucket alone (ms)", "buckets"] == "2.57 → 1.44"
    said = ddp_bounds.bound_sentence("buckets", bound, "one NVIDIA H200")
    assert (
        "backward passes that take turns on one NVIDIA H200 here, not communication, so the 23.0 ms bound "
        "that rests on it is a loose one." in said
    )
    assert "(2.57 to 1.44 ms for the last bucket, which no computation can hide)" in said
    assert not ddp_bounds.waiting(0.05, 0.025, 0.0484)  # a hook's time near the model's is communication
    assert not ddp_bounds.waiting(0.05, 0.025, 0.0242)  # as much after the last gradient as the model has


def test_the_alpha_beta_figures_carry_chapter_four_s_range_of_fits():
    """Issue 37, 14: α is known only between the fit to lower quartiles and the fit to medians."""
    ranged = {**FIT, "medians": {"alpha_seconds": 1e-3, "seconds_per_byte": 2e-9}}
    runs = compression_runs([0.28, 0.29, 0.27])
    bound = ddp_bounds.communication_bound(runs, {"compression": None}, {"compression": "bf16"}, ranged)
    # medians: two buckets of 24,204,440 B (bf16: 12,102,220 B), each 2α + nβ on two ranks
    assert bound["model_seconds_medians"] == pytest.approx([2 * (2e-3 + 0.04840888), 2 * (2e-3 + 0.02420444)])
    # the model's figure is the larger over both fits: 100.8 less the new tail 26.2 ms, against 36.3 ms
    assert bound["model_most_saved"] == pytest.approx(2 * (2e-3 + 0.04840888) - (2e-3 + 0.02420444))
    assert bound["most_saved"] == pytest.approx(0.035)  # a compression's bound is still the hook's
    table = ddp_bounds.bound_table({"bf16": bound})
    assert table.loc["the same, α-β fitted to medians (ms)", "bf16"] == "101 → 52.4"
    assert (
        ddp_bounds.bound_table({"bf16": bound_of([0.28, 0.29, 0.27])}).loc[
            "the same, α-β fitted to medians (ms)", "bf16"
        ]
        == "–"
    )
