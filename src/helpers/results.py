"""Measurement records: one JSON file per measured configuration, written atomically, reused on rerun.

Layout of a run folder ``data/results/<run>/``::

    store.json                  the store's schema version (a folder of another version is refused)
    provenance/<id>.json        hardware fingerprint of the machine that measured, and when it was first seen
    records/<key>.json          one measurement: config, result, provenance id, time of measurement

A record's key hashes its configuration together with the provenance id, so the same configuration
measured on other hardware is a new record, while a rerun on the same machine reuses the finished one.
Introduced in chapter 1; every later chapter stores its measurements here.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from helpers.hardware import fingerprint
from helpers.paths import results_dir

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


def now() -> str:
    """The current UTC time in ISO 8601, to the second."""
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


class ResultStore:
    """The records of one study run; ``measure`` returns a finished record or measures and stores it."""

    def __init__(self, run: str, root: Path | None = None, hardware: dict | None = None) -> None:
        if not run or "/" in run or run.startswith("."):
            raise ValueError(f"run name must be a plain folder name, not {run!r}")
        self.folder = Path(root or results_dir()) / run
        self._check_version()
        self.hardware = hardware or fingerprint()
        self.provenance_id = short_hash(self.hardware)
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

    def key(self, config: dict) -> str:
        """Record key: hash of the configuration and the provenance id."""
        return short_hash({"config": config, "provenance_id": self.provenance_id})

    def path(self, config: dict) -> Path:
        """Where the record of ``config`` lives."""
        return self.folder / "records" / f"{self.key(config)}.json"

    def get(self, config: dict) -> dict | None:
        """The finished record of ``config`` on this hardware, or None."""
        path = self.path(config)
        return json.loads(path.read_text()) if path.exists() else None

    def measure(self, config: dict, function: Callable[[], dict]) -> dict:
        """The record of ``config``: reused when finished, else ``function()`` is run and its result stored.

        ``config`` must hold a ``kind`` (what sort of measurement) and be JSON-serialisable; the result
        must be JSON-serialisable too. If ``function`` raises, nothing is written.
        """
        if "kind" not in config:
            raise ValueError("a measurement config needs a 'kind'")
        canonical_json(config)  # refuse unserialisable configs before any work
        if record := self.get(config):
            return record
        started = time.perf_counter()
        result = function()
        record = {
            "schema_version": SCHEMA_VERSION,
            "key": self.key(config),
            "kind": config["kind"],
            "config": config,
            "result": result,
            "provenance_id": self.provenance_id,
            "measured_at": now(),
            "wall_seconds": time.perf_counter() - started,
        }
        write_json_atomically(self.path(config), record)
        return record

    def records(self, kind: str | None = None) -> list[dict]:
        """Every finished record of this run (any hardware), optionally of one kind, oldest first."""
        found = [json.loads(p.read_text()) for p in (self.folder / "records").glob("*.json")]
        found = [r for r in found if kind is None or r["kind"] == kind]
        return sorted(found, key=lambda r: (r["measured_at"], r["key"]))

    def frame(self, kind: str) -> pd.DataFrame:
        """Records of one kind as a tidy table: config and scalar result fields as columns."""
        rows = []
        for record in self.records(kind):
            row = {**record["config"], "provenance_id": record["provenance_id"]}
            row.update({k: v for k, v in record["result"].items() if not isinstance(v, list | dict)})
            rows.append(row)
        return pd.DataFrame(rows)
