"""helpers.ddp_placement: what chapter 3 says ran where, from its records, on a CPU and on one GPU."""

import re

import pytest

from helpers import ddp_compare, ddp_nccl, ddp_placement, ddp_results, launch
from helpers.hardware import Machine

LINEAR_BYTES, CONV_BYTES = 48_408_880, 1_504_800  # each model's float32 gradients: its parameters x 4


def test_answers_in_words_from_the_verdicts():
    changes = {"LinearNet": {"verdict": "slower"}, "ConvNet": {"verdict": "not resolved"}}
    cpu = ddp_placement.placement(cpu_runs()["scaling"], CPU_MACHINE)
    assert ddp_placement.scaling_sentence(changes, 2, cpu) == (
        "`LinearNet` lost: what DDP adds cost more than any better use of the cores gained. "
        "For `ConvNet` the launches do not resolve a difference."
    )
    assert ddp_placement.scaling_sentence({"ConvNet": {"verdict": "faster"}}, 2, cpu).startswith(
        "`ConvNet` won: 2 processes with a share of the threads each beat one process with all of them"
    )
    # every model with the same verdict: "Both", "All 3", never "Where they lost (`A` and `B`)"
    lost = {"LinearNet": {"verdict": "slower"}, "ConvNet": {"verdict": "slower"}}
    assert ddp_placement.scaling_sentence(lost, 2, cpu).startswith("Both lost: what DDP adds cost more")
    three = {name: {"verdict": "not resolved"} for name in ("A", "B", "C")}
    assert ddp_placement.scaling_sentence(three, 2, cpu) == (
        "For all 3 models the launches do not resolve a difference."
    )
    assert ddp_placement.scaling_sentence({}, 1, cpu) == "With one rank there is nothing to compare."
    gpu = ddp_placement.placement(gpu_runs()["scaling"], H200_MACHINE)
    assert ddp_placement.scaling_sentence(changes, 4, gpu) == (
        "`LinearNet` lost: what DDP adds here (processes taking turns on the GPU, and the all-reduce through "
        "host memory) cost more than splitting the batch saved. For `ConvNet` the launches do not resolve a "
        "difference."
    )
    # the gpu edition: both models lost on four ranks sharing the H200
    assert ddp_placement.scaling_sentence(lost, 4, gpu) == (
        "Both lost: what DDP adds here (processes taking turns on the GPU, and the all-reduce through host "
        "memory) cost more than splitting the batch saved."
    )


# The machines of the two editions, as their fingerprints (store.hardware) describe them
CPU_MACHINE = {"cpu_model": "AMD EPYC", "usable_cores": 2, "gpus": []}


H200_MACHINE = {
    "cpu_model": "Intel(R) Xeon(R) Processor", "usable_cores": 16,
    "gpus": [{"index": 0, "name": "NVIDIA H200", "memory_bytes": 150_109_880_320,
              "compute_capability": "9.0"}],
}  # fmt: skip


def launch_record(backend, device, ranks, step, allreduce, buckets, threads, model="LinearNet", batch=100):
    """A stored DDP launch with the configuration and result fields the chapter's sentences read."""
    config = {"kind": "ddp_run", "backend": backend, "device": device, "world_size": ranks, "model": model,
              "global_batch_size": batch, "optimizer": "adam", "lr": 0.001, "bucket_cap_mb": 25}  # fmt: skip
    result = {"step_seconds_all": [step] * 3, "allreduce_seconds_all": [allreduce] * 3,
              "exposed_allreduce_seconds_all": [allreduce] * 3, "bucket_bytes": list(buckets),
              "world_size": ranks, "threads_per_rank": threads, "warmup_steps": 2,
              "history": [{"step_seconds": [step * 3, step * 1.5] + [step] * 4}]}  # fmt: skip
    return {"config": config, "result": result}


def edition_runs(backend, device, sizes, threads, steps):
    """Chapter 3's scaling launches, three of each: ``steps[model, ranks]`` = (step, all-reduce) seconds."""
    runs = []
    for (model, ranks), (step, allreduce) in steps.items():
        buckets = [LINEAR_BYTES if model == "LinearNet" else CONV_BYTES]
        for number in range(3):
            variation = {"model": model, "backend": backend, "ranks": ranks, "launch": number}
            runs.append((variation, launch_record(backend, device, ranks, step, allreduce, buckets,
                                                  threads[ranks], model)))  # fmt: skip
    return {"scaling": runs}


def gpu_runs():
    """The gpu edition's: Gloo ranks with CUDA tensors, one and four, on one H200 (its medians)."""
    steps = {("LinearNet", 1): (0.00537, 0.00193), ("LinearNet", 4): (0.0400, 0.0345),
             ("ConvNet", 1): (0.0361, 0.000541), ("ConvNet", 4): (0.0407, 0.00233)}  # fmt: skip
    return edition_runs("gloo", "cuda", (1, 4), {1: 16, 4: 4}, steps)


def cpu_runs():
    """The cpu edition's: Gloo ranks with CPU tensors, one and two, on two cores."""
    steps = {("LinearNet", 1): (0.0822, 0.0018), ("LinearNet", 2): (0.162, 0.0333),
             ("ConvNet", 1): (0.514, 0.00033), ("ConvNet", 2): (0.526, 0.0026)}  # fmt: skip
    return edition_runs("gloo", "cpu", (1, 2), {1: 2, 2: 1}, steps)


def plan_on(hardware, backends, device, sizes):
    """``launch.run_plan`` on the machine a fingerprint describes, as the chapter makes it."""
    return launch.run_plan(["nccl", *backends], device, sizes, machine=Machine.from_fingerprint(hardware))


def test_what_ran_is_said_from_the_records_and_what_did_not_with_why():
    # the gpu edition: the plan lets NCCL start one rank on the one H200, but no record is NCCL's
    gpu_plan = plan_on(H200_MACHINE, ["nccl", "gloo"], "cuda", [1, 4])
    assert gpu_plan.query("backend == 'nccl' and runs")["ranks"].tolist() == [1, 1]
    where = ddp_placement.placement(gpu_runs()["scaling"], H200_MACHINE)
    assert (where.backend, where.device, where.ranks, where.gpus, where.threads) == ("gloo", "cuda", 4, 1, 4)
    assert where.shares_gpu and where.staged and where.shared == "one NVIDIA H200"
    largest = ddp_nccl.largest_launches(gpu_runs()["scaling"], where)
    # the title's question answered first, then why, then NCCL's prediction beside Gloo's measurement
    assert ddp_placement.backends_headline(gpu_runs()) == "not compared on this machine"
    answer = ddp_placement.backends_answer(gpu_runs(), gpu_plan, ["nccl", "gloo"], where, largest)
    assert answer == (
        "With one GPU NCCL cannot start more than one rank (it needs a GPU per rank), so every run here is "
        "Gloo. On 4 H200 SXM 141 GB GPUs of their own, joined by NVLink 4 through an NVSwitch, NCCL is "
        "predicted to all-reduce `LinearNet`'s gradients in about 0.21 ms (0.17–0.28 ms over chapter 5's "
        "range of bus bandwidths for the link); Gloo took 34.5 ms here (section 3.4), its 4 ranks taking "
        "turns on one NVIDIA H200."
    )
    assert "NCCL measured" not in answer and "(s)" not in answer
    statement = ddp_placement.measured_statement(gpu_runs(), gpu_plan, ["nccl", "gloo"], where)
    assert statement == (
        "**Measured here:** Gloo with CUDA tensors, 1 and 4 ranks (the 4 ranks taking turns on one NVIDIA "
        "H200). **Not measured here: NCCL** — with one GPU it can start only one rank (NCCL needs one GPU "
        "per rank: 4 ranks asked for, 1 GPU visible); the chapter's one-rank baseline runs on Gloo, the "
        "backend that can run all its rank counts here, so no NCCL run is among these records."
    )
    # the cpu edition: NCCL refused outright, without the launcher's advice
    cpu_plan = plan_on(CPU_MACHINE, ["gloo"], "cpu", [1, 2])
    cpu = ddp_placement.placement(cpu_runs()["scaling"], CPU_MACHINE)
    cpu_largest = ddp_nccl.largest_launches(cpu_runs()["scaling"], cpu)
    assert ddp_placement.backends_headline(cpu_runs()) == "not compared on this machine"
    assert ddp_placement.backends_answer(cpu_runs(), cpu_plan, ["gloo"], cpu, cpu_largest) == (
        "NCCL needs CUDA tensors and this machine has no GPU, so every run here is Gloo. Chapter 5 predicts "
        "NCCL on GPUs for rent."
    )
    assert ddp_placement.measured_statement(cpu_runs(), cpu_plan, ["gloo"], cpu) == (
        "**Measured here:** Gloo with CPU tensors, 1 and 2 ranks (on the machine's 2 cores). **Not measured "
        "here: NCCL** — it needs CUDA tensors, and this machine has no GPU."
    )
    # a GPU machine asked for Gloo with CPU tensors
    on_cpu = ddp_placement.placement(cpu_runs()["scaling"], H200_MACHINE)
    plan = plan_on(H200_MACHINE, ["gloo"], "cpu", [1, 2])
    assert ddp_placement.backends_answer(cpu_runs(), plan, ["gloo"], on_cpu, []) == (
        "NCCL needs CUDA tensors and this run uses CPU tensors, so every run here is Gloo."
    )
    # NCCL left out of the backends asked for, on a machine where it could run
    four = {**H200_MACHINE, "gpus": H200_MACHINE["gpus"] * 4}
    own = ddp_placement.placement(gpu_runs()["scaling"], four)
    asked = plan_on(four, ["gloo"], "cuda", [1, 4])
    assert ddp_placement.backends_answer(gpu_runs(), asked, ["gloo"], own, []) == (
        "NCCL was not among the backends this run was asked to compare, so every run here is Gloo."
    )


def test_where_nccl_and_gloo_both_ran_the_answer_is_nccl_s_speed_up_over_gloo():
    # four GPUs, a GPU per rank: NCCL's launches take a fifth of Gloo's 40 ms (LinearNet) and 95 % of its
    # 40.7 ms (ConvNet), launch n 1 % slower than launch n - 1: LinearNet 40.0 / (8.0 x 1.01) = 4.95x, ConvNet
    # 1/(0.95 x 1.01) = 1.04x, inside the 10 % that matters
    gloo, nccl = gpu_runs()["scaling"], []
    for variation, record in gloo:
        if variation["ranks"] == 4:
            faster = 0.2 if variation["model"] == "LinearNet" else 0.95
            steps = [
                s * faster * (1 + 0.01 * variation["launch"]) for s in record["result"]["step_seconds_all"]
            ]
            copy = {"config": {**record["config"], "backend": "nccl"},
                    "result": {**record["result"], "step_seconds_all": steps}}  # fmt: skip
            nccl.append(({**variation, "backend": "nccl"}, copy))
    runs = {"scaling": gloo + nccl}
    four = {**H200_MACHINE, "gpus": H200_MACHINE["gpus"] * 4}
    where = ddp_placement.placement(runs["scaling"], four)
    plan = plan_on(four, ["nccl", "gloo"], "cuda", [1, 4])
    assert ddp_placement.backends_headline(runs) == "compared on 4 ranks"
    answer = ddp_placement.backends_answer(runs, plan, ["nccl", "gloo"], where, [])
    assert answer == (
        "NCCL's speed-up over Gloo, a GPU per rank (section 3.4): `LinearNet` faster, 4.95× (4.90–5.00×, "
        "3 launches each); `ConvNet` faster by under 10 %, 1.04× (1.03–1.05×, 3 launches each), a 4 % "
        "difference."
    )
    # the box's line: the same verdicts, their intervals left to the body
    assert ddp_placement.backends_brief(runs) == (
        "NCCL's speed-up over Gloo, a GPU per rank: `LinearNet` faster, 4.95×; `ConvNet` faster by under "
        "10 %, 1.04×."
    )
    # Gloo's launches at 15:40-15:42, NCCL's at 20:40-20:42 (as on the H200: hours later, not in rounds)
    stamped = [
        (v, {**r, "measured_at": f"2026-11-26T{15 if v['backend'] == 'gloo' else 20}:4{v['launch']}:00"})
        for v, r in runs["scaling"]
    ]
    assert ddp_placement.backends_brief({"scaling": stamped}).endswith("(the two launched 5.0 h apart).")
    assert "ran 5.0 h apart, not in alternating rounds" in ddp_placement.backends_answer(
        {"scaling": stamped}, plan, ["nccl", "gloo"], where, []
    )
    assert ddp_placement.backends_brief(gloo_only := {"scaling": gloo}) == (
        "They were not compared here: see below."
    ) and not ddp_placement.backend_changes(gloo_only["scaling"])
    table, _ = ddp_results.scaling_table(runs["scaling"])
    assert table.loc[("LinearNet", "nccl", 4), "NCCL against Gloo"].startswith("faster, 4.9")
    assert table.loc[("LinearNet", "gloo", 4), "NCCL against Gloo"] == ""
    assert "NCCL against Gloo" not in ddp_results.scaling_table(gloo)[0].columns


def deepest_parentheses(text: str) -> int:
    """How deep parentheses nest in ``text``, the formula's own left out."""
    depth = deepest = 0
    for char in re.sub(r"2\(k−1\)\(α \+ nβ/k\)", "", text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        deepest = max(deepest, depth)
    return deepest


def step_timing(model, device, batch, threads, seconds):
    """A ``step_timing`` record of chapter 1: one process without DDP."""
    config = {"kind": "step_timing", "model": model, "device": device, "batch_size": batch, "lr": 0.001,
              "optimizer": "adam", "threads": threads, "autocast": None, "seed": 0}  # fmt: skip
    return {"config": config, "result": {"step_seconds_all": [seconds] * 5}}


def test_one_rank_is_set_beside_one_process_without_ddp():
    records = [
        step_timing("LinearNet", "cuda:0", 100, 16, 0.00199),
        step_timing("LinearNet", "cuda:0", 100, 16, 0.00201),
        step_timing("LinearNet", "cuda:0", 100, 16, 0.0030) | {"config": {"autocast": "bf16"}},  # not it
        step_timing("LinearNet", "cuda:0", 50, 16, 0.0010),  # another batch
    ]
    rows = ddp_placement.one_rank_rows(gpu_runs()["scaling"], records)
    assert [(r["model"], r["plain"]) for r in rows] == [
        ("LinearNet", pytest.approx(0.002)),
        ("ConvNet", None),
    ]
    table = ddp_placement.one_rank_table(rows)
    assert table.loc[("LinearNet", "Gloo")].tolist() == ["2.00", "5.37", "1.93", "3.37"]
    assert table.loc[("ConvNet", "Gloo"), "one process, no DDP (ms)"] == "– (chapter 1 did not time it)"
    # chapter 1's records of this machine, which the chapter 1 page of the book need not show
    assert ddp_placement.one_rank_sentence(rows) == (
        "One Gloo rank, with no peer to exchange gradients with, against one process without DDP: 5.37 "
        "against 2.00 ms a step for `LinearNet`; 1.93 ms of the rank's step is the all-reduce, which Gloo "
        "stages through host memory even for one rank, each bucket copied off the GPU and back. The process "
        "without DDP is chapter 1's step timing of the same model, batch of 100, optimizer and threads on "
        "the same GPU, on this same machine. Its batches come from a data set already in the device's "
        "memory, while a DDP rank's step also loads its batch through a DataLoader and copies it to the "
        "GPU: the difference is DDP and that loading together, not DDP alone. This machine's records hold "
        "no chapter 1 timing of a process without DDP of `ConvNet` at a batch of 100 on cuda, so one rank "
        "has nothing beside it here."
    )


# Wording that is true only where the ranks share a CPU's cores, never where they share one GPU
CPU_ONLY = ("On a CPU", "CPU-only", "same cores", "shared cores", "of the cores", "the cores", "2 cores",
            "two cores", "share of the threads", "one CPU")  # fmt: skip


def chapter_sentences(runs, hardware, plan, backends):
    """Every sentence chapter 3's prose functions make of ``runs`` on ``hardware`` (its placement-bound
    ones: what ran, what the ranks share, what they measure), keyed by function."""
    where = ddp_placement.placement(runs["scaling"], hardware)
    largest = ddp_nccl.largest_launches(runs["scaling"], where)
    changes = {"LinearNet": {"verdict": "slower"}, "ConvNet": {"verdict": "faster"}}
    _, missing = ddp_placement.backend_statements(runs, plan, backends, where)
    devices = ["cuda:0"] * where.ranks if where.device == "cuda" else ["cpu"] * where.ranks
    return {
        "measured_statement": ddp_placement.measured_statement(runs, plan, backends, where),
        "backends_headline": ddp_placement.backends_headline(runs),
        "backends_answer": ddp_placement.backends_answer(runs, plan, backends, where, largest),
        "ranks_intro": ddp_placement.ranks_intro(where),
        "scaling_context": ddp_placement.scaling_context(where),
        "scaling_sentence": ddp_placement.scaling_sentence(changes, where.ranks, where),
        "ranks_reading": ddp_nccl.ranks_reading(largest, where),
        "nccl_reading": ddp_nccl.nccl_reading(largest, where),
        "one_rank_sentence": ddp_placement.one_rank_sentence(
            ddp_placement.one_rank_rows(runs["scaling"], [])
        ),
        "loopback_sentence": ddp_placement.loopback_sentence(where),
        "machine_reading": ddp_placement.machine_reading(where, missing),
        "overlap_reading": ddp_placement.overlap_reading(where),
        "dp_reading": ddp_compare.dataparallel_reading(devices, where),
    }


def test_the_gpu_edition_s_sentences_say_nothing_written_for_a_cpu():
    plan = plan_on(H200_MACHINE, ["nccl", "gloo"], "cuda", [1, 4])
    for name, sentence in chapter_sentences(gpu_runs(), H200_MACHINE, plan, ["nccl", "gloo"]).items():
        assert not [words for words in CPU_ONLY if words in sentence], (name, sentence)
        assert "CPU" not in sentence, (name, sentence)
        # cores only as the machine's 16, loopback only with the copies to and from host memory
        assert sentence.count("cores") == sentence.count("16 cores"), (name, sentence)
        assert "loopback" not in sentence or "host memory" in sentence, (name, sentence)
        assert "NCCL measured" not in sentence and "NCCL runs one rank" not in sentence, (name, sentence)
        assert "NCCL needs CUDA tensors" not in sentence and "no GPU" not in sentence, (name, sentence)
        assert "rank(s)" not in sentence and "2024-07" not in sentence, (name, sentence)
    said = chapter_sentences(gpu_runs(), H200_MACHINE, plan, ["nccl", "gloo"])
    assert "one NVIDIA H200" in said["scaling_context"] and "host memory" in said["loopback_sentence"]
    assert "take turns on one NVIDIA H200" in said["overlap_reading"]
    # the bounds as 3.6 defines them: a step holds between the all-reduce's tail and all of it
    assert said["overlap_reading"].endswith(
        "The bounds above, which let the part of an all-reduce before the backward pass's last gradient hide "
        "at no cost (a step holding between the all-reduce's tail after that gradient and all of it), are "
        "the picture of GPUs of their own, where the hidden part is free."
    )
    assert "between none and all" not in " ".join(said.values())
    assert said["backends_answer"].startswith("With one GPU NCCL cannot start more than one rank")
    # NCCL's prediction once in the answer box: in backends_answer, not in ranks_reading beside it
    assert "predicted" in said["backends_answer"] and "predicted" not in said["ranks_reading"]


def test_the_cpu_edition_keeps_its_cpu_wording():
    plan = plan_on(CPU_MACHINE, ["gloo"], "cpu", [1, 2])
    said = chapter_sentences(cpu_runs(), CPU_MACHINE, plan, ["gloo"])
    assert said["scaling_context"].startswith(
        "On a CPU no extra hardware is at work: the comparison is between two ways of using the same 2 cores"
    )
    assert said["ranks_intro"].startswith("With Gloo on one CPU the ranks share its 2 cores")
    assert said["loopback_sentence"].startswith("Over loopback, Gloo sends every byte through the kernel's")
    assert said["machine_reading"].startswith("On a CPU-only machine every rank shares the same 2 cores")
    assert "the same 2 cores as the backward pass" in said["overlap_reading"]
    assert (
        "hide at no cost" in said["overlap_reading"] and "between none and all" not in said["overlap_reading"]
    )
    assert said["dp_reading"].endswith("overheads on the same 2 cores, not as a ranking for GPUs.")
    assert said["backends_answer"].startswith("NCCL needs CUDA tensors and this machine has no GPU")
    for sentence in said.values():
        assert "GPU of its own" not in sentence and "host memory" not in sentence


def with_nccl_one_rank(runs):
    """``gpu_runs`` and NCCL's one rank beside Gloo's on the same H200, as the one-GPU plan now launches it:
    LinearNet's step 4.32 ms against Gloo's 5.37 (all-reduce 0.22 ms), ConvNet's 34.8 against 36.1 ms."""
    nccl = {"LinearNet": (0.00432, 0.00022), "ConvNet": (0.0348, 0.0000045)}
    added = []
    for variation, record in runs["scaling"]:
        if variation["ranks"] == 1:
            step, allreduce = nccl[variation["model"]]
            # LinearNet's NCCL rank still settling in its timed steps: 1.3x its step, then its step
            settling = [1.3, 1.3] if variation["model"] == "LinearNet" else [1.0, 1.0]
            history = [{"step_seconds": [step * s for s in (3, 1.5, *settling, 1, 1)]}]
            result = {**record["result"], "step_seconds_all": [step] * 3,
                      "allreduce_seconds_all": [allreduce] * 3, "history": history,
                      "exposed_allreduce_seconds_all": [allreduce] * 3}  # fmt: skip
            added.append(({**variation, "backend": "nccl"},
                          {"config": {**record["config"], "backend": "nccl"}, "result": result}))  # fmt: skip
    return {"scaling": added + runs["scaling"]}


def test_on_one_gpu_nccl_s_one_rank_is_compared_with_gloo_s_and_the_rest_said_why_not():
    runs = with_nccl_one_rank(gpu_runs())
    plan = plan_on(H200_MACHINE, ["nccl", "gloo"], "cuda", [1, 4])
    where = ddp_placement.placement(runs["scaling"], H200_MACHINE)
    largest = ddp_nccl.largest_launches(runs["scaling"], where)
    assert ddp_placement.backends_headline(runs) == "compared on one rank, not on 4"
    answer = ddp_placement.backends_answer(runs, plan, ["nccl", "gloo"], where, largest)
    # every launch alike: 5.37 / 4.32 = 1.243x, 36.1 / 34.8 = 1.037x, inside the 10 % that matters
    assert answer.startswith(
        "One NCCL rank against one Gloo rank on the same GPU (section 3.4): `LinearNet` faster, 1.24× "
        "(1.24–1.24×, 3 launches each); `ConvNet` faster by under 10 %, 1.04× (1.04–1.04×, 3 launches "
        "each), a 4 % difference. With no peer neither moves a byte between GPUs. The steps differ by 1.05 "
        "and 1.30 ms (medians of the launches; 1.05 and 1.30 ms from any Gloo launch to any NCCL one), the "
        "all-reduces as the hook timed them by 1.71 and 0.537 ms (NCCL's 0.220 and 0.00450 "
        "against Gloo's 1.93 and 0.541, which stages every bucket through host memory); the hook's times "
        "overlap the rest "
        "of the step, so they need not add up to its difference. `LinearNet`'s NCCL rank was still getting "
        "faster in the timed steps (section 3.2's warm-up table), so its median may overstate its settled "
        "step.\n\n"
        "With one GPU NCCL cannot start more than one rank (it needs a GPU per rank), so the runs of 4 ranks "
        "here are Gloo's. On 4 H200 SXM 141 GB GPUs of their own"
    ), answer
    assert ddp_placement.measured_statement(runs, plan, ["nccl", "gloo"], where) == (
        "**Measured here:** NCCL with CUDA tensors, 1 rank (not 4, since NCCL needs one GPU per rank: 4 "
        "ranks asked for, 1 GPU visible); Gloo with CUDA tensors, 1 and 4 ranks (the 4 ranks "
        "taking turns on one NVIDIA H200)."
    )
    table, changes = ddp_results.scaling_table(runs["scaling"])
    assert table.loc[("LinearNet", "nccl", 1), "NCCL against Gloo"].startswith("faster, 1.24")
    # four Gloo ranks are held against one Gloo rank, not against NCCL's: 5.37 / 40.0 ms
    assert changes["LinearNet", "gloo", 4]["baseline_seconds"] == pytest.approx(0.00537)
    records = [step_timing("LinearNet", "cuda:0", 100, 16, 0.00199)]
    rows = ddp_placement.one_rank_rows(runs["scaling"], records)
    assert [(r["model"], r["backend"]) for r in rows] == [
        ("LinearNet", "nccl"), ("ConvNet", "nccl"), ("LinearNet", "gloo"), ("ConvNet", "gloo")
    ]  # fmt: skip
    one = ddp_placement.one_rank_table(rows)
    assert one.loc[("LinearNet", "NCCL"), "one rank (ms)"] == "4.32"
    assert one.loc[("LinearNet", "Gloo"), "one rank (ms)"] == "5.37"
    assert ddp_placement.one_rank_sentence(rows).startswith(
        "One NCCL rank, with no peer to exchange gradients with, against one process without DDP: 4.32 "
        "against 1.99 ms a step for `LinearNet`; 0.220 ms of the rank's step is the all-reduce, which NCCL "
        "runs even for one rank. One Gloo rank: 5.37 against 1.99 ms a step for `LinearNet`; 1.93 ms of the "
        "rank's step is the all-reduce, which Gloo stages through host memory even for one rank, each bucket "
        "copied off the GPU and back. The process without DDP"
    )
