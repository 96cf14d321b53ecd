"""What a machine's records cover: the records each chapter read, what a chapter lacks before it runs, and
the missing work of a profile in steps that fit a short GPU rental.

Every finished execution of a chapter (measuring, or from another machine's records) leaves a manifest,
``data/results/<profile>/manifests/<machine>/<chapter>.json``: the parameters it ran with and each record it
read. Executing that chapter from the machine's records again with the same parameters checks each one
first (``missing_records``), so a missing record is named before anything starts.

``missing_work`` answers "what does this machine still have to measure for this profile?" (``python -m
helpers.study --profile gpu --plan --missing``): per chapter, each planned launch whose record is not
stored (a launch's record configuration follows from its plan: ``record_configs``), which today's code may
ask for beyond a manifest; the records its manifest names that are gone or stale; and, for a chapter
without a manifest for these parameters, its single-process work, which the plan does not key (reused
where recorded). The work goes into steps of at
most ``STEP_MINUTES`` each, one command per step; a step stopped by its time limit resumes, since every
finished record is kept.
"""

from __future__ import annotations

import math
from pathlib import Path

from helpers.paths import results_dir
from helpers.results import ResultStore, canonical_json, now, read_json, write_json_atomically
from helpers.train import counted

STEP_MINUTES = 9  # one command of a GPU rental: at most 10 minutes each, about 15 in all with start-up


def manifest_path(profile: str, machine: str, chapter: str) -> Path:
    """``data/results/<profile>/manifests/<machine>/<chapter>.json``: the records a chapter read."""
    return results_dir() / profile / "manifests" / machine / f"{chapter}.json"


def write_manifest(chapter: str, parameters: dict, profile: str, machine: str, entries: list[dict]) -> Path:
    """Keep the records a finished execution of ``chapter`` read from ``machine`` (its ledger's ``entries``),
    each once, with the ``parameters`` it ran with."""
    records, seen = [], set()
    for entry in entries:
        if (text := canonical_json(entry["config"])) not in seen:
            seen.add(text)
            records.append({"kind": entry["kind"], "config": entry["config"]})
    path = manifest_path(profile, machine, chapter)
    write_json_atomically(
        path, {"chapter": chapter, "parameters": parameters, "written_at": now(), "records": records}
    )
    return path


def manifest(chapter: str, parameters: dict, profile: str, machine: str) -> dict | None:
    """The manifest of ``chapter`` on ``machine`` if it was written with these ``parameters``, else None."""
    path = manifest_path(profile, machine, chapter)
    found = read_json(path) if path.exists() else None
    if found and canonical_json(found["parameters"]) == canonical_json(parameters):
        return found
    return None


def machine_store(profile: str, machine: str) -> ResultStore:
    """The store of ``profile`` as ``machine`` keys it (its records, under today's measurement versions)."""
    return ResultStore(profile, records_of=machine)


def missing_records(chapter: str, parameters: dict, profile: str, machine: str) -> list[str] | None:
    """The records of ``machine`` that ``chapter`` read when it last finished with these parameters and that
    the store no longer finds (gone, or stale under today's measurement versions), one line each (chapter,
    kind, configuration); None when no manifest for these parameters exists."""
    found = manifest(chapter, parameters, profile, machine)
    if found is None:
        return None
    store = machine_store(profile, machine)
    return [
        f"{chapter}: {entry['kind']} {canonical_json(entry['config'])}"
        for entry in found["records"]
        if store.get(entry["config"]) is None
    ]


def record_configs(item) -> list[dict] | None:
    """The record configurations a planned launch (``plan.Item`` with a request) is stored under, one per
    launch; None for work the plan does not key (single-process work, advise's counted launches)."""
    from helpers import lightning_ddp
    from helpers.collectives.runs import WORKER as COLLECTIVES
    from helpers.sharding.runs import WORKER as SHARDING

    request = item.request
    if request is None or not item.keyed:
        return None
    common = {"world_size": request.world_size, **request.config}
    if request.module == "helpers.ddp":
        return [{"kind": "ddp_run", "launch": n, **common} for n in range(item.repeats)]
    if request.module == SHARDING:
        return [{"kind": "sharding_run", "launch": n, **common} for n in range(item.repeats)]
    if request.module == COLLECTIVES:
        return [{"kind": f"collective_{request.config['task']}", **common}]
    if request.module == lightning_ddp.MODULE and lightning_ddp.available():
        version = lightning_ddp.lightning_version()
        return [
            {"kind": "lightning_run", "launch": n, "lightning": version, **common}
            for n in range(item.repeats)
        ]
    return None


def chapter_items(chapter: str, items: list) -> list:
    """The items of ``chapter`` that run on this machine (not skipped, refused, or reused from another)."""
    return [i for i in items if i.chapter == chapter and not (i.skipped or i.refusal or i.reused)]


def absent_launches(items: list, store: ResultStore) -> list[tuple]:
    """Each keyed launch item (``record_configs``) with records the store lacks: (item, the absent record
    configurations, how many it has in all)."""
    found = []
    for item in items:
        configs = record_configs(item) or []
        if absent := [config for config in configs if store.get(config) is None]:
            found.append((item, absent, len(configs)))
    return found


def missing_launch_records(chapter: str, items: list, profile: str, machine: str) -> list[str]:
    """The records of ``chapter``'s planned launches that ``machine`` lacks, one line each (chapter, kind,
    configuration): what a chapter without a manifest is checked for before it starts from records."""
    store = machine_store(profile, machine)
    return [
        f"{chapter}: {config['kind']} {canonical_json(config)}"
        for _, absent, _ in absent_launches(chapter_items(chapter, items), store)
        for config in absent
    ]


def missing_work(chapters: list, items: list, profile: str, machine: str) -> list[dict]:
    """Per chapter of ``chapters`` (``study.Chapter``) with work missing on ``machine``: ``{"chapter",
    "missing": [lines], "seconds"}``, the estimate counting only what is missing (``items``: the plan's
    items of these chapters, timed) and the chapter's start-up."""
    from helpers.plan import assumed

    store = machine_store(profile, machine)
    work = []
    for chapter in chapters:
        mine = chapter_items(chapter.name, items)
        lines, seconds = [], 0.0
        for item, absent, planned in absent_launches(mine, store):  # today's plan may ask for more
            lines.append(f"{chapter.name}: {item.what}: {len(absent)} of {counted(planned, 'launch')}")
            seconds += item.seconds * len(absent) / planned
        if (read := missing_records(chapter.name, chapter.parameters, profile, machine)) is not None:
            if read:  # the manifest names each record: its time is the chapter's, at most
                lines += read
                seconds = sum(item.seconds for item in items if item.chapter == chapter.name)
            if lines:
                work.append({"chapter": chapter.name, "missing": lines, "seconds": seconds})
            continue
        unkeyed = [item for item in mine if record_configs(item) is None]
        seconds += sum(item.seconds for item in unkeyed)
        unkeyed = [item.what.split(",")[0] for item in unkeyed]
        if unkeyed:  # counted whole: an estimate that errs long
            kinds = ", ".join(dict.fromkeys(unkeyed))
            lines.append(
                f"{chapter.name}: {counted(len(unkeyed), 'single-process item')} ({kinds}), not keyed by the "
                "plan and never read here with these parameters: the chapter reuses those recorded"
            )
        if lines:
            work.append({"chapter": chapter.name, "missing": lines, "seconds": seconds})
    for entry in work:
        entry["seconds"] += assumed("chapter start-up, s")
    return work


def steps(work: list[dict], profile: str) -> list[dict]:
    """``work`` packed, in run order, into steps of at most ``STEP_MINUTES``: ``{"chapters", "minutes",
    "command", "repeat"}``; a chapter over the limit is a step of its own, its command repeated (each run
    resumes from the records the last one kept)."""
    packed: list[dict] = []
    for entry in work:
        minutes = entry["seconds"] / 60
        last = packed[-1] if packed else None
        if last and last["repeat"] == 1 and last["minutes"] + minutes <= STEP_MINUTES:
            last["chapters"].append(entry["chapter"])
            last["minutes"] += minutes
        else:
            packed.append({"chapters": [entry["chapter"]], "minutes": minutes,
                           "repeat": max(1, math.ceil(minutes / STEP_MINUTES))})  # fmt: skip
    for step in packed:
        step["command"] = (
            f"python -m helpers.study --profile {profile} --chapters {' '.join(step['chapters'])} "
            f"--time-limit-minutes {STEP_MINUTES}"
        )
    return packed


def describe_missing(work: list[dict], profile: str, machine: str) -> str:
    """What ``--plan --missing`` prints: each missing record or launch, then the steps with their commands."""
    if not work:
        return f"Machine {machine} has every record profile {profile} needs: nothing to measure."
    lines = [f"Missing on machine {machine}, profile {profile}:"]
    lines += [f"- {line}" for entry in work for line in entry["missing"]]
    lines += ["", f"Steps of at most {STEP_MINUTES} minutes (estimates; each step resumes if stopped):"]
    for number, step in enumerate(steps(work, profile), 1):
        again = f", run {step['repeat']} times" if step["repeat"] > 1 else ""
        lines.append(f"{number}. ~{step['minutes']:.1f} min{again}: {step['command']}")
    return "\n".join(lines)
