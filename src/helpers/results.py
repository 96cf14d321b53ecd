"""Measurement records: one JSON file per measured configuration, written atomically, reused on rerun.

Layout of a run folder ``data/results/<run>/``::

    store.json                  the store's schema version (a folder of another version is refused)
    provenance/<id>.json        hardware fingerprint of the machine that measured, and when it was first seen
    records/<key>.json          one measurement: config, result, provenance id, time of measurement

A record's key hashes its configuration together with the provenance id and the version of the code that
measures its kind (``helpers.measurements``: an explicit version per kind, raised when what is computed or
timed changes, and guarded by a digest of the measuring code), so the same configuration measured on other
hardware, or by changed measuring code, is a new record, while a rerun on the same machine reuses the
finished one, however the prose, plots and tables around it have changed. "The same machine" is
``machine_identity``: a virtual machine restarted on another kernel build, which reserves a few KiB of
memory more or less, keeps the provenance id it was first stored under. Records of other machines and code
versions are kept, and ``records`` leaves them out unless asked: a chapter shows the measurements of the
machine that runs it. A record that cannot be read is set aside under ``records/unreadable/`` with a warning
naming it, and measured again. Each record measured carries ``reference`` (``helpers.reference_speed``:
the machine's speed at that moment), and ``together`` keeps the halves of a comparison from two speeds.

Reading another machine's records (``hardware.RECORDS_OF``, set by ``python -m helpers.study
--from-records ID``): the store takes that machine's provenance id and fingerprint, and measures nothing:
a configuration it has no record of raises ``MissingRecord``, naming the chapter, the kind and the
configuration. Schema 1 keyed records by their module's whole text;
``helpers.results_migration`` carries a folder over without losing a record.
Introduced in chapter 1; every later chapter stores its measurements here.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import time
import uuid
import warnings
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import torch
from tqdm import tqdm

from helpers import reference_speed
from helpers.hardware import RECORDS_OF, fingerprint
from helpers.measurements import code_version
from helpers.paths import results_dir

LEDGER_VARIABLE = "STUDY_LEDGER"  # a file the study runner names: each measure() appends what it did there
CHAPTER_VARIABLE = "STUDY_CHAPTER"  # the chapter the study runner is executing, for messages

SCHEMA_VERSION = 2  # 1: records keyed by their module's text (helpers.results_migration carries them over)


class ResultsError(RuntimeError):
    """A results folder that this version of the code must not mix with its own."""


class MissingRecord(ResultsError):
    """A chapter executed from another machine's records asked for one that machine never measured."""


def canonical_json(value) -> str:
    """Key-sorted compact JSON: equal values give equal text, hence equal hashes."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def short_hash(value) -> str:
    """First 16 hex digits of the sha256 of ``value``'s canonical JSON."""
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()[:16]


def write_json_atomically(path: Path, value) -> None:
    """Write to a temporary file in the same folder, flush to disk, then rename over ``path``.

    A reader sees either the old file or the complete new one, never a half-written file.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with partial.open("w") as handle:
            json.dump(value, handle, indent=1, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


def read_json(path: Path) -> dict | None:
    """The JSON of ``path``; an unreadable file is moved to ``unreadable/`` beside it, with a warning."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as error:
        aside = path.parent / "unreadable" / path.name
        aside.parent.mkdir(exist_ok=True)
        os.replace(path, aside)
        warnings.warn(f"unreadable record {path} ({error}) moved to {aside}; it will be measured again",
                      stacklevel=2)  # fmt: skip
        return None


def now() -> str:
    """The current UTC time in ISO 8601, to the second."""
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def machine_identity(hardware: dict) -> dict:
    """The part of a fingerprint that decides whether two machines are one for reusing measurements:
    all of it (processor, cores, GPUs and their links, driver, CUDA, NCCL, torch, Python) but the kernel's
    release, and the memory in whole GiB. A cloud machine's kernel build changes between boots and takes a
    few KiB more or less memory; neither is the hardware or the software stack a measurement depends on."""
    identity = {key: value for key, value in hardware.items() if key not in ("platform", "memory_bytes")}
    words = str(hardware.get("platform", "")).split()
    identity["platform"] = " ".join(words[:1] + words[2:])  # "Linux 6.18.44-fc-v669 x86_64" → "Linux x86_64"
    if hardware.get("memory_bytes") is not None:
        identity["memory_gib"] = round(hardware["memory_bytes"] / 2**30)
    return identity


def stored_machine_id(folder: Path, hardware: dict) -> str | None:
    """The provenance id under which the run in ``folder`` first stored a machine of the same
    ``machine_identity`` as ``hardware`` (the earliest seen); None for a machine new to that run."""
    same = []
    for path in sorted((folder / "provenance").glob("*.json")):
        stored = read_json(path)
        if stored and machine_identity(stored["hardware"]) == machine_identity(hardware):
            same.append((stored["first_seen"], stored["provenance_id"]))
    return min(same)[1] if same else None


JOIN_WITHIN = datetime.timedelta(hours=6)  # rounds of one run that ``together`` may join: one chapter's


def round_age(stamp: str) -> datetime.timedelta:
    """How long ago a round of ``together`` began, from its stamp ("<ISO time> <id>")."""
    return datetime.datetime.now(datetime.UTC) - datetime.datetime.fromisoformat(stamp.split()[0])


class ResultStore:
    """The records of one study run; ``measure`` returns a finished record or measures and stores it."""

    def __init__(
        self,
        run: str,
        root: Path | None = None,
        hardware: dict | None = None,
        code: str | None = None,
        records_of: str | None = None,
    ) -> None:
        if not run or "/" in run or run.startswith("."):
            raise ValueError(f"run name must be a plain folder name, not {run!r}")
        self.folder = Path(root or results_dir()) / run
        self._check_version()
        # whose records it reads instead of measuring: the one named, else the study runner's (RECORDS_OF)
        self.records_of = records_of or (os.environ.get(RECORDS_OF) if hardware is None else None)
        if self.records_of:  # another machine's records: its id and fingerprint, nothing measured
            path = self.folder / "provenance" / f"{self.records_of}.json"
            stored = read_json(path) if path.exists() else None
            if stored is None:
                raise ResultsError(f"{self.folder} holds no records of machine {self.records_of}")
            self.hardware, self.provenance_id = stored["hardware"], self.records_of
        else:
            self.hardware = hardware or fingerprint()
            self.provenance_id = stored_machine_id(self.folder, self.hardware) or short_hash(self.hardware)
        self.fixed_code = code  # tests pin a code version; otherwise each kind's (helpers.measurements)
        self.measured_at: set[str] = set()  # when each record this store has handed out was measured
        self._together: dict | None = None  # inside ``together``: its round stamp, keys measured and reused
        self._remeasure: set[str] = set()  # keys ``together`` found stale: measured again, not reused
        self._rounds: dict[str, set[str]] = {}  # this run's rounds: stamp -> keys of the records it stamped
        self._handed: dict[str, list[dict]] = {}  # records handed out inside ``together``, by key

    def code_version(self, kind: str) -> str:
        """The code version a record of ``kind`` gets (and must still have to be reused)."""
        return self.fixed_code or code_version(kind)

    def _write_provenance(self) -> None:
        """``provenance/<id>.json``: written with this machine's first record, not by merely reading."""
        provenance = self.folder / "provenance" / f"{self.provenance_id}.json"
        if not provenance.exists():
            write_json_atomically(
                provenance,
                {"provenance_id": self.provenance_id, "first_seen": now(), "hardware": self.hardware},
            )

    def _check_version(self) -> None:
        """Create ``store.json``, or refuse a folder written by another schema version."""
        marker = self.folder / "store.json"
        if marker.exists():
            found = json.loads(marker.read_text()).get("schema_version")
            if found != SCHEMA_VERSION:
                carry = (
                    f"`python -m helpers.results_migration {self.folder}` carries it over, "
                    if found == 1
                    else ""
                )
                raise ResultsError(
                    f"{self.folder} holds results of schema version {found}; this code writes "
                    f"version {SCHEMA_VERSION}. {carry}Or choose another run name or move that folder "
                    "away (nothing changed)."
                )
        else:
            write_json_atomically(marker, {"schema_version": SCHEMA_VERSION, "created": now()})

    def key(self, config: dict) -> str:
        """Record key: hash of the configuration, the provenance id and its kind's code version."""
        version = self.code_version(config["kind"])
        return short_hash({"config": config, "provenance_id": self.provenance_id, "code_version": version})

    def path(self, config: dict) -> Path:
        """Where the record of ``config`` lives."""
        return self.folder / "records" / f"{self.key(config)}.json"

    def get(self, config: dict) -> dict | None:
        """The finished record of ``config`` on this hardware, measured by its kind's current code."""
        path = self.path(config)
        return read_json(path) if path.exists() else None

    def _log(self, event: str, record: dict) -> None:
        """Append "measured" or "reused", with the record's kind, configuration and time of measurement, to
        the study runner's ledger (one JSON line each), when it named one."""
        if ledger := os.environ.get(LEDGER_VARIABLE):
            line = {"event": event, **{key: record[key] for key in ("kind", "config", "measured_at")}}
            with open(ledger, "a") as handle:
                handle.write(canonical_json(line) + "\n")

    def measure(self, config: dict, function: Callable[[], dict]) -> dict:
        """The record of ``config``: reused when finished, else ``function()`` is run and its result stored.

        ``config`` must hold a ``kind`` (what sort of measurement) and be JSON-serialisable; the result
        must be JSON-serialisable too. If ``function`` raises, nothing is written.
        """
        if "kind" not in config:
            raise ValueError("a measurement config needs a 'kind'")
        canonical_json(config)  # refuse unserialisable configs before any work
        key = self.key(config)
        if key not in self._remeasure and (record := self.get(config)):
            self._log("reused", record)
            self.measured_at.add(record["measured_at"])
            if self._together is not None and key not in self._together["measured"]:
                self._together["reused"][key] = record  # (one measured afresh in this round is fresh)
                self._handed.setdefault(key, []).append(record)
            return record
        if self.records_of:
            chapter = os.environ.get(CHAPTER_VARIABLE, "this chapter")
            if key in self._remeasure:
                raise MissingRecord(
                    f"{chapter}: machine {self.records_of}'s {config['kind']} record of "
                    f"{canonical_json(config)} belongs to a comparison whose records were measured in "
                    "different rounds (a run stopped while it was measured again); measure it again there"
                )
            raise MissingRecord(
                f"{chapter}: machine {self.records_of} has no {config['kind']} record of "
                f"{canonical_json(config)} (under code {self.code_version(config['kind'])}); measure it there"
            )
        reference = reference_speed.current()  # the machine's speed now (cached for a minute)
        load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
        started = time.perf_counter()
        result = function()
        record = {
            "schema_version": SCHEMA_VERSION,
            "key": self.key(config),
            "kind": config["kind"],
            "config": config,
            "result": result,
            "provenance_id": self.provenance_id,
            "module": getattr(function, "__module__", None),
            "code_version": self.code_version(config["kind"]),
            "measured_at": now(),
            "wall_seconds": time.perf_counter() - started,
            # whether this process let float32 run on TF32 units (launched ranks record their own too)
            "tf32": bool(torch.backends.cuda.matmul.allow_tf32 or torch.backends.cudnn.allow_tf32),
            # the machine's 1-minute load average before and after: other work competing with this
            # measurement shows here (a quiet 2-core machine running one process reads about 1)
            "load_average": [load_before, os.getloadavg()[0] if hasattr(os, "getloadavg") else None],
            "reference": reference,  # helpers.reference_speed: the machine's speed when this began
        }
        if self._together is not None:  # the round of ``together`` it was measured in
            record["measured_with"] = self._together["round"]
        self._write_provenance()
        write_json_atomically(self.path(config), record)
        self._log("measured", record)
        self.measured_at.add(record["measured_at"])
        self._remeasure.discard(key)
        if self._together is not None:
            self._together["measured"][key] = record
            self._handed.setdefault(key, []).append(record)
        return record

    def _new_round(self) -> dict:
        """A round of ``together``: its stamp (stored in each record it measures), its keys measured and
        reused."""
        stamp = datetime.datetime.now(datetime.UTC).isoformat(timespec="microseconds")  # newest sorts last
        return {"round": f"{stamp} {uuid.uuid4().hex[:8]}", "measured": {}, "reused": {}}

    def together(self, body: Callable[[], object]):
        """``body()``'s measurements as one comparison, whose halves are reused together or measured
        together, never one without the other. Each record measured inside carries the round's stamp
        (``measured_with``). When ``body`` measured some records afresh and reused others (one side's
        records removed), or reused records of different rounds (a run stopped while a round was being
        measured again), the reused ones are stale halves, measured on another day at another speed, so
        ``body`` runs once more with those measured again beside the others (which it then reuses).
        Records older than the stamps (none carries one) are taken as one round.

        Two comparisons may share a record (chapter 6's sharding compares against the DDP launch its
        scaling runs measured): a comparison that reuses records of rounds this store measured earlier in
        this run, within ``JOIN_WITHIN`` (a chapter's execution, not a kernel left open until the next
        day), joins them into one round (the latest's stamp). Its records from any earlier run are measured
        again, and what it measures is stamped with the joined round, so that on the next run every
        comparison is one whole round, reused, and none is measured again in turn. Returns what ``body``'s
        last run returned; ``body`` must read its records from ``measure``."""
        if self._together is not None:
            raise RuntimeError("ResultStore.together does not nest: one comparison at a time")
        self._together = self._new_round()
        stale: set[str] = set()
        fresh: set[str] = set()
        try:
            result = body()
            reused = self._together["reused"]
            fresh |= set(self._together["measured"])
            stamps = {record.get("measured_with") for record in reused.values()}
            recent = {stamp for stamp in self._rounds if round_age(stamp) <= JOIN_WITHIN}
            joined = max(stamps & recent, default=None)  # this run's recent rounds it shares records with
            if joined is not None:
                for stamp in stamps & recent - {joined}:  # merged: all of this run, within JOIN_WITHIN
                    keys = self._rounds.pop(stamp)
                    self._stamp(keys, joined)
                    self._rounds[joined] |= keys
                stale = {key for key, record in reused.items() if record.get("measured_with") != joined}
            elif fresh or len(stamps) > 1:
                stale = set(reused)
            if stale:
                self._remeasure |= stale
                self.measured_at -= {reused[key]["measured_at"] for key in stale}  # the discarded days
                self._together = {**self._new_round(), "round": self._together["round"]}  # the same round
                result = body()
                fresh |= set(self._together["measured"])
            if fresh:
                round_stamp = joined or self._together["round"]
                if joined is not None:
                    self._stamp(fresh, joined)
                self._rounds.setdefault(round_stamp, set()).update(fresh)
        finally:
            self._together = None
            self._remeasure -= stale  # a run stopped halfway leaves nothing to re-measure outside a round
        return result

    def _stamp(self, keys: set[str], stamp: str) -> None:
        """Give the records of ``keys`` the round ``stamp``: on disk (read again, so that nothing a caller
        changed in its copy is stored) and in every copy ``together`` handed out."""
        for key in keys:
            path = self.folder / "records" / f"{key}.json"
            stored = read_json(path)
            if stored is not None:
                write_json_atomically(path, {**stored, "measured_with": stamp})
            for record in self._handed.get(key, []):
                record["measured_with"] = stamp

    def records(self, kind: str | None = None, all_machines: bool = False) -> list[dict]:
        """Finished records of this run, optionally of one kind, oldest first: this machine's, measured
        by the current code of their kind, unless ``all_machines`` (every machine and code version,
        for comparisons)."""
        found = [read_json(p) for p in sorted((self.folder / "records").glob("*.json"))]
        found = [r for r in found if r and (kind is None or r["kind"] == kind)]
        if not all_machines:
            found = [
                r for r in found
                if r["provenance_id"] == self.provenance_id
                and r.get("code_version") == self.code_version(r["kind"])
            ]  # fmt: skip
        return sorted(found, key=lambda r: (r["measured_at"], r["key"]))

    def frame(self, kind: str) -> pd.DataFrame:
        """Records of one kind as a tidy table: config and scalar result fields as columns."""
        rows = []
        for record in self.records(kind):
            row = {**record["config"], "provenance_id": record["provenance_id"]}
            row.update({k: v for k, v in record["result"].items() if not isinstance(v, list | dict)})
            rows.append(row)
        return pd.DataFrame(rows)


def measured_in_rounds(
    store: ResultStore,
    entries: list,
    round_of: Callable,
    measure_one: Callable,
    description: str,
    after_round: Callable | None = None,
) -> list:
    """``measure_one(entry)`` for every entry, in order, with a progress bar: the entries of one round
    (equal ``round_of(entry)``, consecutive: alternated launches, every configuration once, then again)
    form one ``store.together``, so a round is reused whole or measured again whole, never half from
    another day. ``after_round(round)``, when given, runs at the end of each round inside it (what is
    compared with that round, measured minutes from it). Returns ``measure_one``'s results in order."""
    numbers = list(dict.fromkeys(map(round_of, entries)))
    rounds = [[entry for entry in entries if round_of(entry) == number] for number in numbers]
    if [entry for members in rounds for entry in members] != list(entries):
        raise ValueError("measured_in_rounds needs each round's entries together, one round after another")
    measured_all = []
    with tqdm(total=len(entries), desc=description) as progress:
        for members in rounds:

            def one_round(members=members, done=progress.n) -> list:
                progress.n = done  # a round measured again counts its entries once
                measured = []
                for entry in members:
                    measured.append(measure_one(entry))
                    progress.update()
                if after_round is not None:
                    after_round(round_of(members[-1]))
                return measured

            measured_all.extend(store.together(one_round))
    return measured_all


def hours_apart(first: list[dict], second: list[dict]) -> float:
    """Hours between two sets of records measured apart: from the last of the earlier set to the first of
    the later; 0 where their spans overlap (measured together, as alternating rounds are) or a record
    keeps no time."""
    stamps = [[r.get("measured_at") for r in records] for records in (first, second)]
    if not all(stamps) or not all(all(times) for times in stamps):
        return 0.0
    (_, earlier_end), (later_start, _) = sorted(
        (min(times), max(times)) for times in ([pd.Timestamp(t) for t in group] for group in stamps)
    )
    return max(0.0, (later_start - earlier_end).total_seconds() / 3600)
