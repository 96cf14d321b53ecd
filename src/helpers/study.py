"""Run the study: execute the chapters with papermill into ``book/chapters/`` (``make study``).

``notebooks/study.yml`` maps each profile to the parameters of each chapter: ``smoke`` (the notebooks'
own defaults), ``cpu`` (the whole study on a CPU-only machine) and ``gpu`` (the seed's experiment on the
visible GPUs); ``auto`` picks ``gpu`` when CUDA devices are visible, else ``cpu``.

Resuming: a chapter whose notebook, parameters and input records are unchanged since its executed copy
was written is skipped, and every measurement is reused through ``helpers.results``, so a rerun after an
interruption only measures what is missing. Safety: each chapter runs papermill in a child process with
a wall-clock limit; on timeout, failure, Ctrl-C or SIGTERM the child and its kernel are stopped, and the
executed notebook is renamed into place only when it finished. One lock per checkout keeps two studies
from writing the same files.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import pandas as pd
import yaml

from helpers.hardware import fingerprint
from helpers.paths import project_root, results_dir
from helpers.processes import stop_process_tree
from helpers.provenance import write_provenance_page
from helpers.results import ResultsError, ResultStore, canonical_json, now

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
    """Hash of the records of the given kinds in ``data/results/<run>/`` (what a chapter reads)."""
    digest = hashlib.sha256()
    folder = results_dir() / run / "records"
    for path in sorted(folder.glob("*.json")) if kinds else []:
        content = path.read_bytes()
        if json.loads(content)["kind"] in kinds:
            digest.update(path.name.encode() + content)
    return digest.hexdigest()[:16]


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
        """Hash of the notebook, its parameters and the records it reads: equal means still current."""
        digest = hashlib.sha256(self.source.read_bytes())
        digest.update(canonical_json(self.parameters).encode())
        digest.update(records_digest(self.parameters.get("results_run", ""), self.reads).encode())
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
    """Names assigned in a notebook's ``parameters`` cell."""
    notebook = nbformat.read(source, as_version=4)
    cell = next(c for c in notebook.cells if "parameters" in c.metadata.get("tags", []))
    lines = [line for line in cell.source.splitlines() if "=" in line and line[:1].isalpha()]
    return {line.split("=")[0].strip() for line in lines}


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


def execute(chapter: Chapter, profile: str) -> float:
    """Run one chapter with papermill in a child process; returns its seconds.

    The executed notebook is written beside the output and renamed into place only if it finished.
    A failed run's notebook is kept as ``<name>.failed.ipynb`` to read the traceback.
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
    process = subprocess.Popen(command, start_new_session=True)
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
        notebook = nbformat.read(partial, as_version=4)
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
                remaining = [c.executed().get("seconds") for c in chapters[number - 1 :]]
                eta = None if None in remaining else sum(remaining)
                print(
                    f"[{number}/{len(chapters)}] {chapter.name} · profile {profile} · elapsed "
                    f"{format_eta(time.perf_counter() - started)} · remaining ~{format_eta(eta)} "
                    f"(last run's durations)",
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
