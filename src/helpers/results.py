"""Measurement records: one JSON file per measured configuration, written atomically, reused on rerun.

Layout of a run folder ``data/results/<run>/``::

    store.json                  the store's schema version (a folder of another version is refused)
    provenance/<id>.json        hardware fingerprint of the machine that measured, and when it was first seen
    records/<key>.json          one measurement: config, result, provenance id, time of measurement

A record's key hashes its configuration together with the provenance id and the code version of the
module that measured it (a digest of its source and of every helper module it imports:
``helpers.dependencies``), so the same configuration measured on other hardware, or by changed code, is
a new record, while a rerun on the same machine with the same code reuses the finished one. "The same
machine" is ``machine_identity``: a virtual machine restarted on another kernel build, which reserves a
few KiB of memory more or less, keeps the provenance id it was first stored under. Records of other
machines and code versions are kept, and ``records`` leaves them out unless asked: a chapter shows the
measurements of the machine that runs it. A record that cannot be read is set aside under
``records/unreadable/`` with a warning naming it, and measured again.
Introduced in chapter 1; every later chapter stores its measurements here.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import torch

from helpers.dependencies import module_version
from helpers.hardware import fingerprint
from helpers.paths import results_dir

LEDGER_VARIABLE = "STUDY_LEDGER"  # a file the study runner names: each measure() appends what it did there

SCHEMA_VERSION = 1


class ResultsError(RuntimeError):
    """A results folder that this version of the code must not mix with its own."""


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


class ResultStore:
    """The records of one study run; ``measure`` returns a finished record or measures and stores it."""

    def __init__(
        self, run: str, root: Path | None = None, hardware: dict | None = None, code: str | None = None
    ) -> None:
        if not run or "/" in run or run.startswith("."):
            raise ValueError(f"run name must be a plain folder name, not {run!r}")
        self.folder = Path(root or results_dir()) / run
        self._check_version()
        self.hardware = hardware or fingerprint()
        self.provenance_id = stored_machine_id(self.folder, self.hardware) or short_hash(self.hardware)
        self.fixed_code = code  # tests pin a code version; otherwise each measuring module's own

    def code_version(self, module: str | None) -> str:
        """The code version a record measured by ``module`` gets (and must still have to be reused)."""
        return self.fixed_code or module_version(module)

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
                raise ResultsError(
                    f"{self.folder} holds results of schema version {found}; this code writes "
                    f"version {SCHEMA_VERSION}. Choose another run name or move that folder away "
                    "(nothing changed)."
                )
        else:
            write_json_atomically(marker, {"schema_version": SCHEMA_VERSION, "created": now()})

    def key(self, config: dict, module: str | None = None) -> str:
        """Record key: hash of the configuration, the provenance id and the measuring code's version."""
        version = self.code_version(module)
        return short_hash({"config": config, "provenance_id": self.provenance_id, "code_version": version})

    def path(self, config: dict, module: str | None = None) -> Path:
        """Where the record of ``config``, measured by ``module``, lives."""
        return self.folder / "records" / f"{self.key(config, module)}.json"

    def get(self, config: dict, module: str | None = None) -> dict | None:
        """The finished record of ``config`` on this hardware, measured by ``module``'s current code."""
        path = self.path(config, module)
        return read_json(path) if path.exists() else None

    def _log(self, event: str, config: dict) -> None:
        """Append "measured" or "reused" to the study runner's ledger, when it named one."""
        if ledger := os.environ.get(LEDGER_VARIABLE):
            with open(ledger, "a") as handle:
                handle.write(f"{event} {config['kind']}\n")

    def measure(self, config: dict, function: Callable[[], dict]) -> dict:
        """The record of ``config``: reused when finished, else ``function()`` is run and its result stored.

        ``config`` must hold a ``kind`` (what sort of measurement) and be JSON-serialisable; the result
        must be JSON-serialisable too. If ``function`` raises, nothing is written.
        """
        if "kind" not in config:
            raise ValueError("a measurement config needs a 'kind'")
        canonical_json(config)  # refuse unserialisable configs before any work
        module = getattr(function, "__module__", None)
        if record := self.get(config, module):
            self._log("reused", config)
            return record
        load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
        started = time.perf_counter()
        result = function()
        record = {
            "schema_version": SCHEMA_VERSION,
            "key": self.key(config, module),
            "kind": config["kind"],
            "config": config,
            "result": result,
            "provenance_id": self.provenance_id,
            "module": module,
            "code_version": self.code_version(module),
            "measured_at": now(),
            "wall_seconds": time.perf_counter() - started,
            # whether this process let float32 run on TF32 units (launched ranks record their own too)
            "tf32": bool(torch.backends.cuda.matmul.allow_tf32 or torch.backends.cudnn.allow_tf32),
            # the machine's 1-minute load average before and after: other work competing with this
            # measurement shows here (a quiet 2-core machine running one process reads about 1)
            "load_average": [load_before, os.getloadavg()[0] if hasattr(os, "getloadavg") else None],
        }
        self._write_provenance()
        write_json_atomically(self.path(config, module), record)
        self._log("measured", config)
        return record

    def records(self, kind: str | None = None, all_machines: bool = False) -> list[dict]:
        """Finished records of this run, optionally of one kind, oldest first: this machine's, measured
        by the current code of their module, unless ``all_machines`` (every machine and code version,
        for comparisons)."""
        found = [read_json(p) for p in sorted((self.folder / "records").glob("*.json"))]
        found = [r for r in found if r and (kind is None or r["kind"] == kind)]
        if not all_machines:
            found = [
                r for r in found
                if r["provenance_id"] == self.provenance_id
                and r.get("code_version") == self.code_version(r.get("module"))
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
