"""helpers.dataparallel_sharing: replicas sharing a CPU's cores or one GPU, said from the records."""

import pytest

from helpers import dataparallel, dataparallel_sharing, stats


def test_ratios_of_times_read_in_per_cent_below_a_tenth():
    assert dataparallel_sharing.times_as_long(0.42) == "0.42× as long"
    assert dataparallel_sharing.times_as_long(0.1) == "0.1× as long"
    assert dataparallel_sharing.times_as_long(0.0025) == "0.0025× as long"
    assert dataparallel_sharing.times_as_long(0.05) == "0.05× as long"


@pytest.mark.parametrize(
    ("verdict", "start"),
    [("faster", "LinearNet ran faster with 4 replicas than with one: its operators left cores idle"),
     ("slower", "LinearNet ran slower with 4 replicas than with one: the replicas' threads share the"),
     ("no measurable difference", "LinearNet ran as fast with 4 replicas as with one: the replicas' threads"),
     ("not resolved", "whether LinearNet ran faster or slower with 4 replicas than with one is not")],
)  # fmt: skip
def test_what_shared_cores_did_follows_the_verdict(verdict, start):
    change = {"speedup": 1.0, "low": 0.5, "high": 2.0, "verdict": verdict, "launches": None}
    assert dataparallel_sharing.shared_replicas_sentence("LinearNet", change, 4).startswith(start)
    on_gpu = dataparallel_sharing.shared_replicas_sentence("LinearNet", change, 4, on_gpu=True)
    assert "GPU" in on_gpu and "cores" not in on_gpu
    assert dataparallel_sharing.shared_replicas_sentence("LinearNet", change, 4, shared=False) == (
        f"LinearNet with 4 replicas on 4 devices against one replica: {verdict}"
    )


def test_where_the_replicas_ran_reads_as_a_sentence():
    on_cpu = {1: (["cpu"], False), 2: (["cpu", "cpu"], True), 4: (["cpu"] * 4, True)}
    assert dataparallel_sharing.placement_sentence(on_cpu) == "1 replica; 2 and 4 replicas, all on the CPU"
    assert (
        dataparallel_sharing.placement_sentence({2: (["cpu", "cpu"], True)}) == "2 replicas, all on the CPU"
    )
    one_gpu = {1: (["cuda:0"], False), 2: (["cuda:0", "cuda:0"], True)}
    assert dataparallel_sharing.placement_sentence(one_gpu) == "1 replica; 2 replicas, all on GPU 0"
    gpus = {
        1: (["cuda:0"], False),
        2: (["cuda:0", "cuda:1"], False),
        3: (["cuda:0", "cuda:1", "cuda:2"], False),
    }
    assert dataparallel_sharing.placement_sentence(gpus) == (
        "1 replica on GPU 0; 2 replicas on GPUs 0 and 1; 3 replicas on GPUs 0, 1 and 2"
    )


def h200_linearnet(replicas: int) -> dict:
    """LinearNet at batch 100 on one H200, as its records hold it: forward 0.336 and backward 0.739 ms with
    one replica, 2.443 and 3.375 ms with four sharing the GPU (7.27x and 4.57x)."""
    phases = {"forward": 0.000336, "backward": 0.000739} if replicas == 1 else {
        "forward": 0.002443, "backward": 0.003375}  # fmt: skip
    moving = dict.fromkeys(dataparallel.TRANSFER_PHASES, 0.00002 if replicas == 1 else 0.0003)
    steps = [0.0020, 0.0021, 0.0022] if replicas == 1 else [0.0087, 0.0089, 0.0091]
    return {"replicas": replicas, "step_seconds_all": steps, "compute_seconds": 0.00689,
            "transfer_seconds": 0.00183, "communication_to_compute": 0.00183 / 0.00689,
            "phase_seconds": phases | moving}  # fmt: skip


def test_replicas_sharing_one_h200_are_explained_by_what_the_records_show():
    """46.2 MiB of weights read once at the datasheet's 4.8 TB/s: about 10 us; forward and backward grew
    by 4.74 ms; 7.27x and 4.57x exceed the 4x of repeating one replica's whole phase four times. The host
    is a plausible cause, said as one; the CPU's reading (every weight re-read on the same cores) is not
    said on a GPU."""
    said = dataparallel_sharing.explain_replicas(
        h200_linearnet(1), h200_linearnet(4), shared=True, on_gpu=True, weight_bytes=48_408_880,
        gpu="NVIDIA H200",
    )  # fmt: skip
    assert "The forward took 7.27× and the backward 4.57× as long as with one replica" in said
    assert ": on one GPU the two together grew by 4.74 ms." in said
    assert (
        "one pass over the 46.2 MiB of weights takes about 10 µs at the 4.8 TB/s the datasheet gives for the "
        "H200 SXM 141 GB (chapter 5 lists the source), the two passes of 4 replicas about 81 µs" in said
    )
    assert (
        "The forward's 7.27× and the backward's 4.57× are more than the 4× it would take if each of the 4 "
        "replicas ran one replica's whole forward and backward in turn" in said
    )
    assert "do not split the growth between the GPU and the host" in said
    assert said.endswith(
        "A plausible cause, not measured in this chapter, is the host: each replica's phase runs in a thread "
        "of its own (`helpers.dataparallel.in_threads`), the threads take turns holding Python's interpreter "
        "lock, and together they issue 4 times one replica's kernel launches onto the GPU's one default "
        "stream."
    )
    for cpu_wording in ("same cores", "so that work is done once per replica", "runs the whole model on"):
        assert cpu_wording not in said
    # without the weights' bytes or a GPU in the specifications, no datasheet figure is said
    bare = dataparallel_sharing.explain_replicas(h200_linearnet(1), h200_linearnet(4), True, on_gpu=True)
    assert "datasheet" not in bare and "A plausible cause, not measured in this chapter" in bare


def test_what_sharing_one_h200_did_is_said_per_model_with_its_reason_once():
    single, multi = h200_linearnet(1), h200_linearnet(4)
    slower = stats.speedup(single["step_seconds_all"], multi["step_seconds_all"])
    entries = [
        {"model": name, "change": slower, "replicas": 4, "shared": True, "on_gpu": True, "batch": 100,
         "single": single, "multi": multi}
        for name in ("LinearNet", "ConvNet")
    ]  # fmt: skip
    said = dataparallel_sharing.shared_replicas_sentences(entries)
    assert said == (
        "LinearNet at batch 100 ran slower with 4 replicas than with one (median step 2.10 ms with one "
        "replica, 8.90 ms with 4; by the phases' medians, the forward and backward +4.74 ms, moving data "
        "+1.40 ms), and so did ConvNet at batch 100 (median step 2.10 ms with one replica, 8.90 ms with 4; "
        "by the phases' medians, the forward and backward +4.74 ms, moving data +1.40 ms): the replicas "
        "share one GPU and the host process that issues their kernels, so they add no hardware, and every "
        "phase that grew with them added to the step"
    )
    assert "cores" not in said and "nothing ran in parallel" not in said
    # different verdicts keep their own reasons; on the CPU, the cores'
    faster = dict(slower, verdict="faster")
    mixed = dataparallel_sharing.shared_replicas_sentences(
        [entries[0], {"model": "ConvNet", "change": faster, "replicas": 4, "on_gpu": True}]
    )
    assert "; ConvNet ran faster with 4 replicas than with one: a plausible cause, not measured" in mixed
    on_cpu = dataparallel_sharing.shared_replicas_sentence("LinearNet", slower, 4, batch=30)
    assert on_cpu.startswith("LinearNet at batch 30 ran slower with 4 replicas than with one: the replicas' "
                             "threads share the same cores")  # fmt: skip


def test_torch_dataparallel_on_one_gpu_runs_no_collective():
    one = dataparallel_sharing.torch_dataparallel_note(1)
    assert (
        "runs the module itself (`device_ids=[0]`)" in one
        and "neither replicates, gathers nor reduces" in one
    )
    assert "pipelined" not in one
    for gpus in (0, 2, 8):
        assert dataparallel_sharing.torch_dataparallel_note(gpus).startswith(
            "Its broadcast and reduce are NCCL's pipelined collectives"
        )
