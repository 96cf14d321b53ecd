"""How long each chapter took on each machine, and what it measured and reused (make study's estimates).

The study runner's ledger (results.LEDGER_VARIABLE) lists what each measurement of a chapter did; each
chapter's duration is kept per machine in data/results/<profile>/durations.json with the number of
records it measured and reused, and the estimate of the time left comes from the last run that reused
nothing (a fresh measurement).
"""

from __future__ import annotations

import json
from pathlib import Path

from helpers.hardware import fingerprint
from helpers.paths import results_dir
from helpers.results import now, read_json, short_hash, stored_machine_id, write_json_atomically


def machine_id(profile: str) -> str:
    """This machine's provenance id in the results run ``profile``: the id its store reuses records under
    (``results.stored_machine_id``: the same machine after a reboot or a kernel update), else the hash of
    its fingerprint, as the store would name it."""
    hardware = fingerprint()
    return stored_machine_id(results_dir() / profile, hardware) or short_hash(hardware)


def durations_path(profile: str) -> Path:
    """``data/results/<profile>/durations.json``: each chapter's last runs per machine."""
    return results_dir() / profile / "durations.json"


def read_durations(profile: str) -> dict:
    """Per machine id, per chapter: the last run and the last fresh run (seconds, records measured/reused)."""
    path = durations_path(profile)
    return (read_json(path) or {}) if path.exists() else {}


def read_ledger(ledger: Path) -> list[dict]:
    """What each of a chapter's measurements did, in order: ``{"event", "kind", "config", "measured_at"}``
    (``results.ResultStore._log``)."""
    text = ledger.read_text() if ledger.exists() else ""
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def record_duration(profile: str, chapter: str, seconds: float, entries: list[dict]) -> dict:
    """Keep this run of ``chapter`` in the durations file: as its last run and, when it reused no record
    (``entries``: its ledger), as its last fresh one."""
    events = [entry["event"] for entry in entries]
    run = {
        "seconds": round(seconds, 1),
        "measured": events.count("measured"),
        "reused": events.count("reused"),
        "finished_at": now(),
    }
    durations = read_durations(profile)
    entry = durations.setdefault(machine_id(profile), {}).setdefault(chapter, {})
    entry["last"] = run
    if run["reused"] == 0:
        entry["fresh"] = run
    write_json_atomically(durations_path(profile), durations)
    return run


def estimate_seconds(profile: str, chapters: list[str]) -> tuple[float | None, bool]:
    """Seconds the ``chapters`` took when last measured fresh on this machine, and whether every one of
    them has such a run (otherwise the last runs' durations fill in, and the estimate is a lower bound)."""
    known = read_durations(profile).get(machine_id(profile), {})
    total, fresh = 0.0, True
    for name in chapters:
        runs = known.get(name, {})
        if "fresh" in runs:
            total += runs["fresh"]["seconds"]
        elif "last" in runs:
            total, fresh = total + runs["last"]["seconds"], False
        else:
            return None, False
    return total, fresh
