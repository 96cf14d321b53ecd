"""What sharing one device does to chapter 2's DataParallel replicas, in words: where the replicas ran, why
more replicas on one device cannot speed a step up, and what each phase's growth does and does not show,
on a CPU's cores or one GPU alike, from the records and the fingerprint of the machine that measured them.
"""

from __future__ import annotations

import statistics

import torch

from helpers.dataparallel import TRANSFER_PHASES
from helpers.dataparallel_results import datasheet, gpu_model, ms
from helpers.models import MIB
from helpers.stats import MATTERS, describe_speedup, listed, signed, significant, speedup
from helpers.train import counted


def times_as_long(ratio: float) -> str:
    """A ratio of times to read, one form whatever its size: ``0.42× as long``, ``0.0025× as long``."""
    return f"{ratio:.2g}× as long"


def shared_device_note(on_gpu: bool = False) -> str:
    """What timings of replicas that share one device measure, for the sweep's table: on the CPU's cores,
    or (``on_gpu``) on one GPU whose kernels one host process issues. Markdown."""
    where = (
        "every replica computes on the same GPU, and one host process issues every replica's kernels"
        if on_gpu
        else "every replica computes on the same cores"
    )
    gain = (
        "GPU time, or host time issuing kernels, that one replica leaves idle"
        if on_gpu
        else "cores that one replica leaves idle"
    )
    return (
        f"**The replicas share one {'GPU' if on_gpu else 'device'} on this machine**, so these timings "
        "measure what DataParallel's mechanics *cost* — the copies, the threads, the extra kernel launches "
        f"— not a speed-up: {where}. A machine with one GPU per replica runs the same notebook and shows "
        f"the speed-up, if there is one (`gpu` profile). A gain here can only come from {gain} (section 2.6)."
    )


def device_phrase(device: str, hardware: dict) -> str:
    """``device`` (``cpu`` or ``cuda:i``) named for a reader: ``the CPU's 2 cores``, ``one NVIDIA H200
    (GPU 0)``."""
    if torch.device(device).type != "cuda":
        cores = hardware.get("usable_cores") or hardware.get("cpu_cores")
        return f"the CPU's {cores} cores" if cores else "the CPU"
    name = gpu_model(hardware, device)
    index = torch.device(device).index or 0
    return f"one {name} (GPU {index})" if name else f"GPU {index}"


def where_replicas_ran(devices: list[str], shared: bool, hardware: dict) -> str:
    """Where the most replicas ran (``dataparallel.replica_devices``), for the chapter's answer: ``the
    replicas share one device, the CPU's 2 cores``, or ``each of the 4 replicas has a GPU of its own``."""
    if shared:
        return f"the replicas share one device, {device_phrase(devices[0], hardware)}"
    if len(set(devices)) == len(devices) > 1:
        return f"each of the {len(devices)} replicas has a GPU of its own"
    return f"the replica runs on {device_phrase(devices[0], hardware)}"


def sharing_phrase(devices: list[str], shared: bool, hardware: dict) -> str:
    """The most replicas and where they ran, to follow "with": ``4 replicas sharing one NVIDIA H200 (GPU
    0)``, ``4 replicas sharing the CPU's 2 cores``, ``4 replicas on 4 GPUs``."""
    replicas = counted(len(devices), "replica")
    if shared:
        return f"{replicas} sharing {device_phrase(devices[0], hardware)}"
    return f"{replicas} on {counted(len(set(devices)), 'GPU')}"


def torch_dataparallel_note(gpus: int) -> str:
    """How ``torch.nn.DataParallel`` moves parameters and gradients on a machine with ``gpus`` usable GPUs,
    for section 2.7: NCCL's pipelined collectives between GPUs; with one GPU none at all, since it then
    runs the module itself (its ``forward`` returns ``self.module(...)`` when ``device_ids`` has one entry);
    with none, it is not timed. Plain text."""
    if gpus == 1:
        return (
            "With one GPU, as here, it runs the module itself (`device_ids=[0]`): it places the inputs on "
            "that GPU and neither replicates, gathers nor reduces, so no NCCL collective runs, and the table "
            "below compares its one-replica step with the rebuild's"
        )
    collectives = (
        "Its broadcast and reduce are NCCL's pipelined collectives, not the rebuild's copies from $d_0$, so "
        "its transfer phases can be shorter than the rebuild's at the same bytes"
    )
    return collectives


def explain_replicas(
    single: dict, multi: dict, shared: bool, on_gpu: bool = False, weight_bytes: int | None = None,
    gpu: str | None = None,
) -> str:  # fmt: skip
    """What k replicas did to one step, from the ``time_dataparallel_steps`` results of 1 and k replicas,
    and why: the seed's label (a "network choke" moves data longer than it computes, a "compute choke",
    the seed's "GPU choke", the reverse), the step against one replica (``helpers.stats.speedup``), and
    how the forward and the backward changed, which the label does not see (the optimizer's update, done
    once whatever the replicas, would dilute a ratio of all the computing). ``shared``: the replicas share
    one device, so each runs the whole model on the same cores, or (``on_gpu``) the same GPU, where the
    records do not split the phases' growth between the GPU and the host that issues its kernels: what
    they show is said, and a cause only as a plausible one. With ``weight_bytes`` (the model's parameters)
    and ``gpu`` (the driver's name of a GPU in ``costmodel.specs``), the time one read of the weights takes
    at the datasheet's bandwidth. Markdown: its paragraphs apart by a blank line."""
    ratio = multi["communication_to_compute"]
    kind = "network choke" if ratio >= 1 else "compute choke"
    change = speedup(single["step_seconds_all"], multi["step_seconds_all"])
    one, many = single["phase_seconds"], multi["phase_seconds"]
    replicated = (many["forward"] + many["backward"]) / (one["forward"] + one["backward"])
    text = (
        f"with {multi['replicas']} replicas moving data took {ms(multi['transfer_seconds'])} ms per step and "
        f"computing {ms(multi['compute_seconds'])} ms, {times_as_long(ratio)}: a {kind} by the seed's "
        "definition (moving longer than computing is a network choke, the reverse a compute choke, the "
        'seed\'s "GPU choke").\n\nThe '
        f"step against one replica: {describe_speedup(change)}. The forward took "
        f"{many['forward'] / one['forward']:.2f}× and the backward {many['backward'] / one['backward']:.2f}× "
        f"as long as with one replica (one replica: {ms(one['forward'])} ms forward, "
        f"{ms(one['backward'])} ms backward)"
    )
    if replicated > 1 + MATTERS and shared and on_gpu:
        return text + gpu_growth(single, multi, weight_bytes, gpu)
    if replicated > 1 + MATTERS and shared:
        return text + (
            ": every replica runs the whole model on the same cores, its forward reading every weight and "
            "its backward writing a gradient of every weight, so that work is done once per replica "
            "whatever the chunk."
        )
    if replicated < 1 / (1 + MATTERS) and shared and on_gpu:
        return text + (
            ": the two shrank with the replicas. A plausible cause, not measured in this chapter: the "
            "replicas' threads filled GPU time, or host time issuing kernels, that one replica left idle."
        )
    if replicated < 1 / (1 + MATTERS) and shared:
        return text + ": the replicas' threads kept busy cores that one replica's operators left idle."
    return text + "."


def gpu_growth(single: dict, multi: dict, weight_bytes: int | None = None, gpu: str | None = None) -> str:
    """What the records say about a forward and backward that grew with replicas sharing one GPU, for
    ``explain_replicas``: by how much; against the replicas' re-reading of the weights at the datasheet's
    bandwidth (with ``weight_bytes`` and ``gpu``); against the k× that running one replica's whole phase
    once per replica would take; and, labelled as such, the host as a plausible cause (each replica's
    phase in a thread of its own, ``dataparallel.in_threads``). Plain text, from ``:`` to the full stop."""
    k = multi["replicas"]
    one, many = single["phase_seconds"], multi["phase_seconds"]
    grown = many["forward"] + many["backward"] - one["forward"] - one["backward"]
    text = f": on one GPU the two together grew by {ms(grown)} ms."
    sheet = datasheet(gpu)
    if weight_bytes and sheet:
        read = weight_bytes / sheet.memory_bandwidth
        text += (
            " Each replica reading every weight in its forward and writing a gradient of every weight in "
            f"its backward does not account for that: one pass over the {weight_bytes / MIB:,.1f} MiB of "
            f"weights takes about {significant(read * 1e6, 2)} µs at the {sheet.memory_bandwidth / 1e12:.1f} "
            f"TB/s the datasheet gives for the {sheet.name} (chapter 5 lists the source), the two passes of "
            f"{k} replicas about {significant(2 * k * read * 1e6, 2)} µs."
        )
    over = [
        (phase, many[phase] / one[phase]) for phase in ("forward", "backward") if many[phase] > k * one[phase]
    ]
    if over:
        named = " and ".join(f"the {phase}'s {ratio:.2f}×" for phase, ratio in over)
        text += (
            f" {named[0].upper()}{named[1:]} {'is' if len(over) == 1 else 'are'} more than the {k}× it "
            f"would take if each of the {k} replicas ran one replica's whole "
            f"{' and '.join(phase for phase, _ in over)} in turn, so the replicas slowed each other down "
            "beyond repeating the work."
        )
    text += (
        "\n\nThe records time each phase as a whole, on the host's clock, and do not split the growth "
        "between the GPU and the host."
    )
    host = (
        "each replica's phase runs in a thread of its own (`helpers.dataparallel.in_threads`), the threads "
        f"take turns holding Python's interpreter lock, and together they issue {k} times one replica's "
        "kernel launches onto the GPU's one default stream"
    )
    if over:
        return text + f" A plausible cause, not measured in this chapter, is the host: {host}."
    return text + (
        f" Plausible causes, not measured in this chapter: on the host, {host}; on the GPU, each replica's "
        f"kernels work on 1/{k} of the batch and may use it less fully."
    )


def shared_replicas_sentence(
    model: str, change: dict, replicas: int, shared: bool = True, on_gpu: bool = False,
    batch: int | None = None, single: dict | None = None, multi: dict | None = None,
) -> str:  # fmt: skip
    """What ``replicas`` replicas sharing one device (its cores, or with ``on_gpu`` one GPU) did to
    ``model``'s step against one replica (``helpers.stats.speedup``), said only as far as its verdict goes
    (``explain_replicas`` gives the figures; a cause on a GPU only as a plausible one); with one device per
    replica (``shared`` False), the verdict alone. With ``batch``, the batch it was measured at; with
    ``single`` and ``multi`` (the ``time_dataparallel_steps`` results of one and of ``replicas``
    replicas), where the step's growth went, by the phases' medians. Plain text."""
    head, reason = shared_replicas_parts(model, change, replicas, shared, on_gpu, batch, single, multi)
    return f"{head}: {reason}" if reason else head


def shared_replicas_sentences(entries: list[dict]) -> str:
    """``shared_replicas_sentence`` of each entry (its keyword arguments), joined by semicolons, with a
    reason that the entry before gives in the same words said once: ``LinearNet … ran slower … (…), and
    so did ConvNet … (…): the replicas share …``. Plain text."""
    groups: list[tuple[list[str], str]] = []
    for entry in entries:
        head, reason = shared_replicas_parts(**entry)
        if groups and reason and groups[-1][1] == reason and entry["change"]["verdict"] in VERDICT_WORDS:
            subject = f"{entry['model']} at batch {entry['batch']}" if entry.get("batch") else entry["model"]
            single, multi = entry.get("single"), entry.get("multi")
            grew = growth_clause(single, multi) if single and multi else ""
            groups[-1][0].append(f"so did {subject}{grew}")
        else:
            groups.append(([head], reason))
    return "; ".join(", and ".join(heads) + (f": {reason}" if reason else "") for heads, reason in groups)


VERDICT_WORDS = ("faster", "slower", "no measurable difference")  # verdicts whose sentences "so did" repeats


def shared_replicas_parts(
    model: str, change: dict, replicas: int, shared: bool = True, on_gpu: bool = False,
    batch: int | None = None, single: dict | None = None, multi: dict | None = None,
) -> tuple[str, str]:  # fmt: skip
    """``shared_replicas_sentence`` in two parts: what happened (with the figures of ``growth_clause``)
    and why, as far as the verdict goes; the reason is empty with one device per replica."""
    verdict = change["verdict"]
    subject = f"{model} at batch {batch}" if batch is not None else model
    if not shared:
        return f"{subject} with {replicas} replicas on {replicas} devices against one replica: {verdict}", ""
    grew = growth_clause(single, multi) if single and multi else ""
    ran = {
        "faster": f"{subject} ran faster with {replicas} replicas than with one{grew}",
        "slower": f"{subject} ran slower with {replicas} replicas than with one{grew}",
        "no measurable difference": f"{subject} ran as fast with {replicas} replicas as with one{grew}",
    }.get(verdict, f"whether {subject} ran faster or slower with {replicas} replicas than with one is not "
                   f"resolved{grew}")  # fmt: skip
    if on_gpu:
        reasons = {
            "faster": "a plausible cause, not measured in this chapter, is that the replicas' threads filled "
            "GPU time, or host time issuing kernels, that one replica left idle — a better use of the same "
            "GPU, not extra hardware, and no prediction of scaling over several GPUs",
            "slower": "the replicas share one GPU and the host process that issues their kernels, so they "
            "add no hardware, and every phase that grew with them added to the step",
            "no measurable difference": "what the replicas repeat on the one GPU and its host cost too "
            "little to show",
        }
        unresolved = (
            "what the replicas' threads gained or lost on the one GPU and its host does not show through the "
            "spread of the steps"
        )
    else:
        reasons = {
            "faster": "its operators left cores idle that the replicas' threads filled, a better use of the "
            "same cores, not extra hardware, and no prediction of GPU scaling",
            "slower": "the replicas' threads share the same cores, so nothing ran in parallel that one "
            "replica's operators did not already run in parallel, and every phase that grew with the "
            "replicas added to the step",
            "no measurable difference": "the replicas' threads found no idle cores to fill, and their "
            "repeated work cost little",
        }
        unresolved = (
            "idle cores filled by the replicas' threads, if any, do not show through the spread of the steps"
        )
    return ran, reasons.get(verdict, unresolved)


def growth_clause(single: dict, multi: dict) -> str:
    """`` (median step 2.11 ms with one replica, 8.89 ms with 4; by the phases' medians, the forward and
    backward +4.74 ms, moving data +1.65 ms)``: one model's step with one replica and with more, and what
    its compute and transfer phases added (``time_dataparallel_steps`` results)."""

    one, many = single["phase_seconds"], multi["phase_seconds"]
    computed = many["forward"] + many["backward"] - one["forward"] - one["backward"]
    moved = sum(many[phase] - one[phase] for phase in TRANSFER_PHASES if phase in one and phase in many)
    before, after = (statistics.median(result["step_seconds_all"]) for result in (single, multi))
    return (
        f" (median step {ms(before)} ms with one replica, {ms(after)} ms with {multi['replicas']}; by the "
        f"phases' medians, the forward and backward {signed(computed * 1e3)} ms, moving data "
        f"{signed(moved * 1e3)} ms)"
    )


def placement_sentence(placements: dict[int, tuple[list[str], bool]]) -> str:
    """Where the replicas of each count ran (``{count: replica_devices(...)}``), to read: ``1 replica; 2
    and 4 replicas, all on the CPU`` or ``1 replica on GPU 0; 2 replicas on GPUs 0 and 1``."""

    def device_name(name: str) -> str:
        return "the CPU" if name == "cpu" else f"GPU {torch.device(name).index or 0}"

    counts = sorted(placements)
    everywhere = {device for devices, _ in placements.values() for device in devices}
    if len(everywhere) == 1:
        single = ["1 replica"] if 1 in counts else []
        several = [count for count in counts if count > 1]
        groups = single + ([f"{listed(several)} replicas"] if several else [])
        return f"{'; '.join(groups)}, all on {device_name(everywhere.pop())}"
    parts = []
    for count in counts:
        devices = list(dict.fromkeys(placements[count][0]))
        where = (
            device_name(devices[0])
            if len(devices) == 1
            else f"GPUs {listed([torch.device(device).index for device in devices])}"
        )
        parts.append(f"{counted(count, 'replica')} on {where}")
    return "; ".join(parts)
