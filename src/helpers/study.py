"""Run the study: execute the chapters with papermill into ``book/chapters/`` (``make study``).

``notebooks/study.yml`` maps each profile to the parameters of each chapter: ``smoke`` (the notebooks'
own defaults), ``cpu`` (the whole study on a CPU-only machine) and ``gpu`` (the seed's experiment on the
visible GPUs); ``auto`` picks ``gpu`` when CUDA devices are visible, else ``cpu``.

Resuming: a chapter whose notebook, parameters, input records, code (``src/helpers``) and machine are
unchanged since its executed copy was written is skipped, and every measurement is reused through
``helpers.results``, so a rerun after an interruption only measures what is missing, while a rerun on
other hardware or with a fixed helper measures afresh. Safety: each chapter runs papermill in a child
process with a wall-clock limit; on timeout, failure, Ctrl-C or SIGTERM the child and its kernel are
stopped, and the executed notebook is renamed into place only when it finished. One lock per checkout
keeps two studies from writing the same files. Time: each chapter's duration is kept per machine in
``data/results/<profile>/durations.json`` with the number of records it measured and reused; the
estimate of the time left comes from the last run that reused nothing (a fresh measurement).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import fcntl
import hashlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import pandas as pd
import yaml

from helpers.dependencies import code_version, imported_helpers
from helpers.hardware import fingerprint
from helpers.paths import project_root, results_dir
from helpers.processes import stop_process_tree
from helpers.provenance import write_provenance_page
from helpers.results import (
    LEDGER_VARIABLE,
    ResultsError,
    ResultStore,
    canonical_json,
    now,
    read_json,
    short_hash,
    write_json_atomically,
)

PROFILES = ("smoke", "cpu", "gpu")
DEFAULT_TIME_LIMIT_MINUTES = 60


class StudyError(RuntimeError):
    """A chapter that failed, timed out or was interrupted."""


def notebooks_dir() -> Path:
    """``notebooks/``: the chapters' sources and ``study.yml``."""
    return project_root() / "notebooks"


def chapters_dir() -> Path:
    """``book/chapters/``: the executed chapters the book is built from."""
    return project_root() / "book" / "chapters"


def records_digest(run: str, kinds: list[str]) -> str:
    """Hash of this machine's records of the given kinds in ``data/results/<run>/`` (what a chapter reads)."""
    digest = hashlib.sha256()
    if kinds and (results_dir() / run).exists():
        for record in ResultStore(run).records():
            if record["kind"] in kinds:
                digest.update(f"{record['key']} {record['measured_at']}".encode())
    return digest.hexdigest()[:16]


def notebook_helpers(source: Path) -> frozenset[str]:
    """The helper modules a notebook's code cells import (their closure is what it runs)."""
    notebook = nbformat.read(source, as_version=4)
    code = "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "code")
    return frozenset(imported_helpers(code)) or frozenset({"helpers"})


def machine_id() -> str:
    """The provenance id of this machine (the hash of its hardware fingerprint)."""
    return short_hash(fingerprint())


@dataclass(frozen=True)
class Chapter:
    """One notebook to execute with its profile's parameters."""

    name: str
    source: Path
    output: Path
    parameters: dict
    reads: list[str] = field(default_factory=list)
    time_limit_seconds: float = DEFAULT_TIME_LIMIT_MINUTES * 60

    def fingerprint(self) -> str:
        """Hash of the notebook, its parameters, the records it reads, the helpers' code and this machine:
        equal means the executed copy is still current here."""
        digest = hashlib.sha256(self.source.read_bytes())
        digest.update(canonical_json(self.parameters).encode())
        digest.update(records_digest(self.parameters.get("results_run", ""), self.reads).encode())
        digest.update(f"{code_version(notebook_helpers(self.source))} {machine_id()}".encode())
        return digest.hexdigest()[:16]

    def executed(self) -> dict:
        """The ``study`` metadata of the executed copy ({} when there is none)."""
        if not self.output.exists():
            return {}
        return nbformat.read(self.output, as_version=4).metadata.get("study", {})

    def is_current(self) -> bool:
        """The executed copy exists, finished, and was made from this notebook, parameters and inputs."""
        executed = self.executed()
        return executed.get("fingerprint") == self.fingerprint() and executed.get("status") == "finished"


def visible_gpus() -> int:
    """Number of CUDA devices torch can see."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def resolve_profile(name: str) -> str:
    """``auto`` becomes ``gpu`` or ``cpu``; an unknown name or ``gpu`` without GPUs is refused."""
    if name == "auto":
        return "gpu" if visible_gpus() else "cpu"
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r}; choose one of {', '.join((*PROFILES, 'auto'))}")
    if name == "gpu" and not visible_gpus():
        raise ValueError("profile 'gpu' needs CUDA devices, and none is visible; use 'cpu' or 'smoke'")
    return name


def declared_parameters(source: Path) -> set[str]:
    """Names a notebook's ``parameters`` cell assigns: plain, tuple (``a, b = …``) and annotated names."""
    notebook = nbformat.read(source, as_version=4)
    cell = next(c for c in notebook.cells if "parameters" in c.metadata.get("tags", []))
    names = set()
    for statement in ast.parse(cell.source).body:
        targets = statement.targets if isinstance(statement, ast.Assign) else (
            [statement.target] if isinstance(statement, ast.AnnAssign) else []
        )  # fmt: skip
        for target in targets:
            names |= {node.id for node in ast.walk(target) if isinstance(node, ast.Name)}
    return names


def durations_path(profile: str) -> Path:
    """``data/results/<profile>/durations.json``: each chapter's last runs per machine."""
    return results_dir() / profile / "durations.json"


def read_durations(profile: str) -> dict:
    """Per machine id, per chapter: the last run and the last fresh run (seconds, records measured/reused)."""
    path = durations_path(profile)
    return (read_json(path) or {}) if path.exists() else {}


def record_duration(profile: str, chapter: str, seconds: float, ledger: Path) -> dict:
    """Keep this run of ``chapter`` in the durations file: as its last run and, when it reused no record
    (``ledger`` lists what each measurement did), as its last fresh one."""
    events = ledger.read_text().split() if ledger.exists() else []
    run = {
        "seconds": round(seconds, 1),
        "measured": events.count("measured"),
        "reused": events.count("reused"),
        "finished_at": now(),
    }
    durations = read_durations(profile)
    entry = durations.setdefault(machine_id(), {}).setdefault(chapter, {})
    entry["last"] = run
    if run["reused"] == 0:
        entry["fresh"] = run
    write_json_atomically(durations_path(profile), durations)
    return run


def estimate_seconds(profile: str, chapters: list[str]) -> tuple[float | None, bool]:
    """Seconds the ``chapters`` took when last measured fresh on this machine, and whether every one of
    them has such a run (otherwise the last runs' durations fill in, and the estimate is a lower bound)."""
    known = read_durations(profile).get(machine_id(), {})
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


def plan(
    profile: str, names: list[str] | None = None, config: Path | None = None, gpus: int | None = None
) -> list[Chapter]:
    """The chapters to run, in order, with their parameters; unknown names and parameters are refused.

    ``gpus`` (how many GPUs the multi-device chapters may use) is passed to every chapter that declares
    a ``gpus`` parameter; asking for more than are visible is refused.
    """
    sources = {path.stem: path for path in sorted(notebooks_dir().glob("[0-9][0-9]_*.ipynb"))}
    study = yaml.safe_load((config or notebooks_dir() / "study.yml").read_text())
    settings = study.get("profiles", {}).get(profile) or {}
    reads = study.get("reads", {})
    limits = study.get("time_limit_minutes", {})
    if unknown := sorted((set(settings) | set(reads)) - set(sources)):
        raise ValueError(f"study.yml names unknown chapters: {', '.join(unknown)}")
    if unknown := sorted(set(names or []) - set(sources)):
        raise ValueError(f"unknown chapter(s) {', '.join(unknown)}; known: {', '.join(sources)}")
    if gpus is not None and gpus > visible_gpus():
        raise ValueError(f"{gpus} GPUs asked for, but {visible_gpus()} are visible")
    chapters = []
    for name in (n for n in sources if not names or n in names):
        declared = declared_parameters(sources[name])
        parameters = {"results_run": profile, **(settings.get(name) or {})}
        if gpus is not None and "gpus" in declared:
            parameters["gpus"] = gpus
        if unknown := sorted(set(parameters) - declared):
            raise ValueError(f"{name} has no parameter(s) {', '.join(unknown)} (study.yml, {profile})")
        chapters.append(
            Chapter(
                name=name,
                source=sources[name],
                output=chapters_dir() / f"{name}.ipynb",
                parameters=parameters,
                reads=reads.get(name, []),
                time_limit_seconds=60 * limits.get(profile, DEFAULT_TIME_LIMIT_MINUTES),
            )
        )
    return chapters


HIDDEN_CELLS = {"parameters": "hide-cell", "injected-parameters": "hide-cell"}  # folded, not gone


def hide_setup(notebook: nbformat.NotebookNode) -> None:
    """Tag the parameters and papermill's injected parameters so that the book folds them away."""
    for cell in notebook.cells:
        tags = cell.metadata.setdefault("tags", [])
        for tag, hidden in HIDDEN_CELLS.items():
            if tag in tags and hidden not in tags:
                tags.append(hidden)


def execute(chapter: Chapter, profile: str) -> float:
    """Run one chapter with papermill in a child process; returns its seconds.

    The executed notebook is written beside the output and renamed into place only if it finished.
    A failed run's notebook is kept as ``<name>.failed.ipynb`` to read the traceback. Every record the
    chapter measures or reuses is counted (``results.LEDGER_VARIABLE``) into the durations file.
    """
    chapter.output.parent.mkdir(parents=True, exist_ok=True)
    partial = chapter.output.with_name(f".{chapter.name}.{os.getpid()}.partial.ipynb")
    failed = chapter.output.with_name(f"{chapter.name}.failed.ipynb")
    command = [
        sys.executable, "-m", "papermill", str(chapter.source), str(partial),
        "--cwd", str(chapter.source.parent), "--kernel", "python3",
        "--parameters_yaml", yaml.safe_dump(chapter.parameters),
    ]  # fmt: skip
    started = time.perf_counter()
    ledger = Path(tempfile.mkstemp(prefix=f"ledger-{chapter.name}-")[1])
    process = subprocess.Popen(
        command, start_new_session=True, env={**os.environ, LEDGER_VARIABLE: str(ledger)}
    )
    try:
        try:
            returncode = process.wait(timeout=chapter.time_limit_seconds)
        except subprocess.TimeoutExpired:
            stop_process_tree(process)
            raise StudyError(
                f"{chapter.name} exceeded its {chapter.time_limit_seconds / 60:.0f} min limit and was stopped"
            ) from None
        except BaseException:
            stop_process_tree(process)
            raise
        seconds = time.perf_counter() - started
        if returncode != 0:
            if partial.exists():
                os.replace(partial, failed)
            raise StudyError(f"{chapter.name} failed (papermill exit {returncode}); see {failed}")
        record_duration(profile, chapter.name, seconds, ledger)
        notebook = nbformat.read(partial, as_version=4)
        hide_setup(notebook)
        notebook.metadata["study"] = {
            "profile": profile,
            "parameters": chapter.parameters,
            "fingerprint": chapter.fingerprint(),
            "status": "finished",
            "finished_at": now(),
            "seconds": round(seconds, 1),
            "hardware": fingerprint(),
        }
        nbformat.write(notebook, partial)
        os.replace(partial, chapter.output)
        failed.unlink(missing_ok=True)
        return seconds
    finally:
        partial.unlink(missing_ok=True)
        ledger.unlink(missing_ok=True)


@contextlib.contextmanager
def study_lock():
    """Hold ``book/chapters/.study.lock``; a second study in the same checkout is refused, not mixed in."""
    chapters_dir().mkdir(parents=True, exist_ok=True)
    path = chapters_dir() / ".study.lock"
    with path.open("a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            raise ValueError(
                f"another study is running in this checkout (pid {handle.read().strip() or '?'}); "
                "wait for it, or run the second one from another checkout"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        yield


def _raise_on_sigterm(signum, frame):
    """SIGTERM behaves like Ctrl-C, so that cleanup in ``finally`` blocks runs."""
    raise KeyboardInterrupt(f"signal {signum}")


def format_eta(seconds: float | None) -> str:
    """``12m05s``-style duration, or ``?`` when unknown."""
    if seconds is None:
        return "?"
    minutes, seconds = divmod(int(seconds), 60)
    return f"{minutes}m{seconds:02d}s"


def run(
    profile: str,
    names: list[str] | None = None,
    force: bool = False,
    gpus: int | None = None,
    time_limit_minutes: float | None = None,
) -> pd.DataFrame:
    """Check everything, then run (or skip) every planned chapter; returns the summary table.

    An interrupt (Ctrl-C, SIGTERM) stops the chapter in progress, which is reported as ``interrupted``.
    """
    profile = resolve_profile(profile)
    chapters = plan(profile, names, gpus=gpus)
    if time_limit_minutes is not None:
        chapters = [dataclasses.replace(c, time_limit_seconds=60 * time_limit_minutes) for c in chapters]
    ResultStore(profile)  # refuses a results folder of another schema version before any work
    rows = []
    started = time.perf_counter()
    previous = signal.signal(signal.SIGTERM, _raise_on_sigterm)
    try:
        with study_lock():
            for number, chapter in enumerate(chapters, 1):
                to_run = [c.name for c in chapters[number - 1 :] if force or not c.is_current()]
                eta, fresh = estimate_seconds(profile, to_run)
                basis = "last fresh runs here" if fresh else "last runs here, some reused records: at least"
                print(
                    f"[{number}/{len(chapters)}] {chapter.name} · profile {profile} · elapsed "
                    f"{format_eta(time.perf_counter() - started)} · remaining ~{format_eta(eta)} ({basis})",
                    flush=True,
                )
                if not force and chapter.is_current():
                    rows.append({"chapter": chapter.name, "status": "skipped (current)", "seconds": 0.0})
                    continue
                chapter_started = time.perf_counter()
                try:
                    execute(chapter, profile)
                    status = "finished"
                except StudyError as error:
                    status = "failed"
                    print(error, file=sys.stderr, flush=True)
                except KeyboardInterrupt:
                    status = "interrupted"
                rows.append(
                    {
                        "chapter": chapter.name,
                        "status": status,
                        "seconds": round(time.perf_counter() - chapter_started, 1),
                    }
                )
                if status == "interrupted":
                    break
    finally:
        signal.signal(signal.SIGTERM, previous)
    write_provenance_page()
    summary = pd.DataFrame(rows)
    summary["output"] = [str(c.output.relative_to(project_root())) for c in chapters[: len(rows)]]
    return summary


def main(argv: list[str] | None = None) -> int:
    """``python -m helpers.study --profile auto``: execute the chapters, print a summary table."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--profile", default="auto", help="smoke, cpu, gpu or auto (default)")
    parser.add_argument("--chapters", nargs="*", help="chapter names, e.g. 01_single_device (default: all)")
    parser.add_argument("--gpus", type=int, help="GPUs the multi-device chapters may use (default: all)")
    parser.add_argument("--force", action="store_true", help="rerun chapters even when current")
    parser.add_argument("--time-limit-minutes", type=float, help="per-chapter limit (default: study.yml)")
    parser.add_argument("--price-per-hour", type=float, help="hourly price of this machine, for the summary")
    args = parser.parse_args(argv)
    if args.price_per_hour is not None and args.price_per_hour < 0:
        parser.error("--price-per-hour must not be negative")
    if args.gpus is not None and args.gpus < 1:
        parser.error("--gpus must be at least 1")
    try:
        summary = run(args.profile, args.chapters, args.force, args.gpus, args.time_limit_minutes)
    except (ValueError, OSError, ResultsError) as error:
        parser.error(str(error))
    except KeyboardInterrupt:  # between chapters: nothing was running
        print("study interrupted: finished chapters and records are kept; rerun to resume", file=sys.stderr)
        return 130
    total_hours = summary["seconds"].sum() / 3600
    print(summary.to_string(index=False))
    total = f"total {format_eta(total_hours * 3600)}"
    if args.price_per_hour is not None:
        total += f" · cost at ${args.price_per_hour:.2f}/h: ${total_hours * args.price_per_hour:.2f}"
    print(total)
    if (summary["status"] == "interrupted").any():
        print("study interrupted: finished chapters and records are kept; rerun to resume", file=sys.stderr)
        return 130
    return 1 if (summary["status"] == "failed").any() else 0


if __name__ == "__main__":
    sys.exit(main())
