"""Run the study: execute the chapters with papermill into ``book/chapters/<profile>/`` (``make study``).

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

Executing from records (``--from-records ID``): the chapters run on any machine, GPU or not, from the
records machine ``ID`` stored in ``data/results/<profile>/``, and measure nothing (``hardware.RECORDS_OF``:
the notebook sees that machine's GPUs, cores and probes). Every finished execution leaves a manifest of
the records it read (``helpers.coverage``); before a chapter starts from records, each record its manifest
for the same parameters lists is looked up, and a chapter missing any is refused, each missing record
named, before anything starts. A chapter with no such manifest stops at its first missing record, named,
leaving its executed copy as it was. The executed chapter's metadata names the machine that measured
(``hardware``), the one that executed it (``executed_on``) and when its records were measured.
``--plan --missing`` lists what a machine (this one, or ``--from-records ID``) still lacks, in steps that
fit a short GPU rental.
"""

from __future__ import annotations

import argparse
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

from helpers.coverage import (
    describe_missing,
    missing_launch_records,
    missing_records,
    missing_work,
    write_manifest,
)
from helpers.dependencies import code_version
from helpers.durations import estimate_seconds, machine_id, read_ledger, record_duration
from helpers.hardware import (
    RECORDS_OF,
    Machine,
    add_machine_arguments,
    busy_warning,
    cuda_problem,
    fingerprint,
    machine_from_arguments,
    stored_fingerprint,
)
from helpers.notebook_parameters import declared_parameters, notebook_defaults, notebook_helpers
from helpers.paths import project_root, results_dir
from helpers.processes import stop_process_tree
from helpers.provenance import publish
from helpers.results import (
    CHAPTER_VARIABLE,
    LEDGER_VARIABLE,
    ResultsError,
    ResultStore,
    canonical_json,
    now,
)

PROFILES = ("smoke", "cpu", "gpu")
DEFAULT_TIME_LIMIT_MINUTES = 60


class StudyError(RuntimeError):
    """A chapter that failed, timed out or was interrupted."""


def notebooks_dir() -> Path:
    """``notebooks/``: the chapters' sources and ``study.yml``."""
    return project_root() / "notebooks"


def chapters_dir(profile: str | None = None) -> Path:
    """``book/chapters/``, and ``book/chapters/<profile>/``: one edition's executed chapters (the book is
    built from the editions ``helpers.provenance`` picks)."""
    folder = project_root() / "book" / "chapters"
    return folder / profile if profile else folder


def records_digest(run: str, kinds: list[str] | None, all_machines: bool = False) -> str:
    """Hash of the records in ``data/results/<run>/`` a chapter reads: this machine's of the given
    ``kinds``, or (``all_machines``) every machine's of every kind, as a chapter that compares with
    other machines' measurements reads them (chapter 5's GPU step times)."""
    digest = hashlib.sha256()
    if (kinds or all_machines) and (results_dir() / run).exists():
        for record in ResultStore(run).records(all_machines=all_machines):
            if all_machines or record["kind"] in kinds:
                digest.update(f"{record['key']} {record['measured_at']}".encode())
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
    records_of: str | None = None  # the machine whose records it is executed from (nothing measured)

    def fingerprint(self) -> str:
        """Hash of the notebook, its parameters, the records it reads (its own run's of the kinds in
        study.yml's ``reads``; every record of any other run a ``*_results_run`` parameter names), the
        helpers' code and this machine: equal means the executed copy is still current here."""
        digest = hashlib.sha256(self.source.read_bytes())
        digest.update(canonical_json(self.parameters).encode())
        arguments = {**notebook_defaults(self.source), **self.parameters}
        digest.update(records_digest(arguments.get("results_run", ""), self.reads).encode())
        for name, folder in sorted(arguments.items()):  # other runs it reads: e.g. gpu_results_run
            if name.endswith("_results_run") and folder:
                digest.update(records_digest(folder, None, all_machines=True).encode())
        run = arguments.get("results_run", "")
        machine = f"records of {self.records_of}" if self.records_of else machine_id(run)
        digest.update(f"{code_version(notebook_helpers(self.source))} {machine}".encode())
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


def resolve_profile(name: str, machine: Machine | None = None) -> str:
    """``auto`` becomes ``gpu`` or ``cpu``; an unknown name or ``gpu`` without GPUs is refused.

    GPUs that nvidia-smi lists but torch cannot use (a driver too old for torch's CUDA) are refused with
    the reason, never quietly replaced by the CPU. ``machine`` is a described one (a plan's): its GPUs
    count instead of this machine's.
    """
    if name not in (*PROFILES, "auto"):
        raise ValueError(f"unknown profile {name!r}; choose one of {', '.join((*PROFILES, 'auto'))}")
    if machine is None and name in ("auto", "gpu") and (problem := cuda_problem()):
        raise ValueError(f"{problem} (run `--profile cpu` to use the CPU anyway)")
    gpus = machine.gpus if machine is not None else visible_gpus()
    if name == "auto":
        return "gpu" if gpus else "cpu"
    if name == "gpu" and not gpus:
        raise ValueError("profile 'gpu' needs CUDA devices, and none is visible; use 'cpu' or 'smoke'")
    return name


def plan(
    profile: str,
    names: list[str] | None = None,
    config: Path | None = None,
    gpus: int | None = None,
    machine: Machine | None = None,
) -> list[Chapter]:
    """The chapters to run, in study.yml's ``run_order``, with their parameters; unknown names and
    parameters are refused.

    ``gpus`` (how many GPUs the multi-device chapters may use) is passed to every chapter that declares
    a ``gpus`` parameter; asking for more than are visible (on ``machine``, when it describes one) is
    refused.
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
    visible = machine.gpus if machine is not None else visible_gpus()
    if gpus is not None and gpus > visible:
        raise ValueError(f"{gpus} GPUs asked for, but {visible} are visible")
    order = study.get("run_order") or list(sources)
    if sorted(order) != sorted(sources):
        raise ValueError(
            f"study.yml's run_order must name every chapter once, not {', '.join(order)}; "
            f"the chapters: {', '.join(sources)}"
        )
    chapters = []
    for name in (n for n in order if not names or n in names):
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
                output=chapters_dir(profile) / f"{name}.ipynb",
                parameters=parameters,
                reads=reads.get(name, []),
                time_limit_seconds=60 * limits.get(profile, DEFAULT_TIME_LIMIT_MINUTES),
            )
        )
    return chapters


HIDDEN_CELLS = {"parameters": "hide-cell", "injected-parameters": "hide-cell"}  # folded, not gone
FOLD_LABELS = {  # what the book's toggle of each folded cell says (myst-nb's code_prompt_show / _hide)
    "parameters": ("Show the chapter's default parameters", "Hide the default parameters"),
    "injected-parameters": ("Show the parameters this edition ran with", "Hide the edition's parameters"),
}


def hide_setup(notebook: nbformat.NotebookNode) -> None:
    """Tag the parameters and papermill's injected parameters so that the book folds them away, each
    toggle labelled with what it holds (``FOLD_LABELS``) rather than "Show code cell content"."""
    for cell in notebook.cells:
        tags = cell.metadata.setdefault("tags", [])
        for tag, hidden in HIDDEN_CELLS.items():
            if tag in tags and hidden not in tags:
                tags.append(hidden)
            if tag in tags:
                show, hide = FOLD_LABELS[tag]
                cell.metadata["mystnb"] = {"code_prompt_show": show, "code_prompt_hide": hide}


def execute(chapter: Chapter, profile: str) -> float:
    """Run one chapter with papermill in a child process; returns its seconds.

    The executed notebook is written beside the output and renamed into place only if it finished.
    A failed run's notebook is kept as ``<name>.failed.ipynb`` to read the traceback. Every record the
    chapter measures or reuses is logged (``results.LEDGER_VARIABLE``): counted into the durations file
    (when it measured here) and kept as its manifest.
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
    environment = {**os.environ, LEDGER_VARIABLE: str(ledger), CHAPTER_VARIABLE: chapter.name}
    environment.pop(RECORDS_OF, None)
    if chapter.records_of:
        environment[RECORDS_OF] = chapter.records_of
    process = subprocess.Popen(command, start_new_session=True, env=environment)
    try:
        try:
            returncode = process.wait(timeout=chapter.time_limit_seconds)
        except subprocess.TimeoutExpired:
            stop_process_tree(process)
            raise StudyError(
                f"{chapter.name} exceeded its {format_eta(chapter.time_limit_seconds)} limit and was stopped"
            ) from None
        except BaseException:
            stop_process_tree(process)
            raise
        seconds = time.perf_counter() - started
        if returncode != 0:
            if partial.exists():
                os.replace(partial, failed)
            raise StudyError(f"{chapter.name} failed (papermill exit {returncode}); see {failed}")
        entries = read_ledger(ledger)
        if not chapter.records_of:  # a duration is of measuring, not of reading records
            record_duration(profile, chapter.name, seconds, entries)
        measured = sorted(entry["measured_at"] for entry in entries)
        machine = chapter.records_of or ResultStore(profile).provenance_id
        notebook = nbformat.read(partial, as_version=4)
        hide_setup(notebook)
        read_from = {"records_of": chapter.records_of, "executed_on": fingerprint()}
        notebook.metadata["study"] = {
            "profile": profile,
            "parameters": chapter.parameters,
            "fingerprint": chapter.fingerprint(),
            "status": "finished",
            "finished_at": now(),
            "seconds": round(seconds, 1),
            "hardware": stored_fingerprint(chapter.records_of) if chapter.records_of else fingerprint(),
            "measured_between": [measured[0], measured[-1]] if measured else None,
            **(read_from if chapter.records_of else {}),
        }
        nbformat.write(notebook, partial)
        os.replace(partial, chapter.output)
        failed.unlink(missing_ok=True)
        write_manifest(chapter.name, chapter.parameters, profile, machine, entries)
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


def _interrupt(signum, frame):
    """SIGTERM and SIGINT stop the study as Ctrl-C does, so that cleanup in ``finally`` blocks runs."""
    raise KeyboardInterrupt(f"signal {signum}")


@contextlib.contextmanager
def interruptible():
    """Install ``_interrupt`` for SIGINT and SIGTERM whatever this process inherited, restore after.

    A shell without job control starts ``cmd &`` with SIGINT ignored, and Python then installs no
    KeyboardInterrupt handler of its own: Ctrl-C (or ``kill -INT``) would be dropped and a chapter would
    run on to its time limit. Explicit handlers make both signals stop it, however the study was started.
    """
    previous = {signum: signal.signal(signum, _interrupt) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():  # None: a handler set outside Python, not restorable
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)


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
    records_of: str | None = None,
) -> pd.DataFrame:
    """Check everything, then run (or skip) every planned chapter; returns the summary table.

    An interrupt (Ctrl-C, SIGTERM) stops the chapter in progress, which is reported as ``interrupted``;
    one that arrives before the first chapter or after the last (while planning, or writing the
    provenance page) raises KeyboardInterrupt. Both signals are handled so from the first check to the
    provenance page, whatever handlers the process inherited, and those are restored afterwards.
    """
    with interruptible():
        return _run(profile, names, force, gpus, time_limit_minutes, records_of)


def from_records(
    profile: str, names: list[str] | None, gpus: int | None, records_of: str
) -> tuple[str, list[Chapter]]:
    """The profile and chapters to execute from machine ``records_of``'s records (as that machine: its GPUs
    count), refused before anything starts with every missing record that a manifest for the same
    parameters names and that the launches of today's plan name."""
    machine = Machine.from_fingerprint(stored_fingerprint(records_of))
    profile = resolve_profile(profile, machine)
    if not (results_dir() / profile / "provenance" / f"{records_of}.json").exists():
        raise ValueError(f"data/results/{profile}/ holds no records of machine {records_of}")
    chapters = [
        dataclasses.replace(chapter, records_of=records_of)
        for chapter in plan(profile, names, gpus=gpus, machine=machine)
    ]
    from helpers.chapter_plans import CHAPTERS

    # the whole profile's plan, in run order: a chapter reads an earlier chapter's all-reduce (reused)
    planned = [c.name for c in plan(profile, None, gpus=gpus, machine=machine) if c.name in CHAPTERS]
    items = planned_items(profile, planned, machine, gpus) if planned else []
    missing = []
    for chapter in chapters:
        missing += missing_records(chapter.name, chapter.parameters, profile, records_of) or []
        if chapter.name in CHAPTERS:  # and its launches as today's plan keys them (the code may ask for more)
            missing += missing_launch_records(chapter.name, items, profile, records_of)
    missing = list(dict.fromkeys(missing))
    if missing:
        lines = "\n".join(missing)
        raise ValueError(f"machine {records_of} lacks records the chapters need (nothing started):\n{lines}")
    return profile, chapters


def _run(
    profile: str,
    names: list[str] | None,
    force: bool,
    gpus: int | None,
    time_limit_minutes: float | None,
    records_of: str | None = None,
) -> pd.DataFrame:
    """``run``'s work, with its signal handlers in place."""
    if records_of:
        profile, chapters = from_records(profile, names, gpus, records_of)
    else:
        profile = resolve_profile(profile)
        chapters = plan(profile, names, gpus=gpus)
    if time_limit_minutes is not None:
        chapters = [dataclasses.replace(c, time_limit_seconds=60 * time_limit_minutes) for c in chapters]
    if profile == "gpu" and not records_of:  # a rented machine: prove every launch before one starts
        from helpers.plan import chapter_minutes

        items = planned_items(profile, names, Machine.here(), gpus)
        refused = [f"{item.chapter}: {item.what}: {item.refusal}" for item in items if item.refusal]
        if refused:
            raise ValueError("the plan refuses, before anything starts:\n" + "\n".join(refused))
        minutes = chapter_minutes(items)
        print(
            f"plan: {minutes.sum():.0f} min estimated ("
            + ", ".join(f"{n} {m:.1f}" for n, m in minutes.items())
            + "); `--plan` lists every launch",
            flush=True,
        )
    ResultStore(profile)  # refuses a results folder of another schema version before any work
    if profile != "smoke" and not records_of and (busy := busy_warning()):
        print(busy, flush=True)
    rows = []
    started = time.perf_counter()
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
            rows.append(run_chapter(chapter, profile))
            if rows[-1]["status"] == "interrupted":
                break
        rows += rerun_readers(chapters, rows, profile)
    publish()
    summary = pd.DataFrame(rows)
    outputs = {c.name: str(c.output.relative_to(project_root())) for c in chapters}
    summary["output"] = [outputs[name] for name in summary["chapter"]] if rows else []
    return summary


def rerun_readers(chapters: list[Chapter], rows: list[dict], profile: str) -> list[dict]:
    """Chapters that finished (or were current) earlier in this run but read records a later chapter has
    since written (chapter 5 reads chapter 6's steps to a target): each is run once more, its own
    measurements reused, so that one ``make study`` leaves every chapter current. Nothing after an
    interruption."""
    if any(row["status"] == "interrupted" for row in rows):
        return []
    done = {row["chapter"] for row in rows if row["status"] in ("finished", "skipped (current)")}
    again = []
    for chapter in chapters:
        if chapter.name in done and not chapter.is_current():
            print(f"[again] {chapter.name}: records it reads changed after it ran", flush=True)
            again.append(run_chapter(chapter, profile, "finished again (its inputs changed)"))
            if again[-1]["status"] == "interrupted":
                break
    return again


def run_chapter(chapter: Chapter, profile: str, finished: str = "finished") -> dict:
    """Execute one chapter; its summary row: ``finished`` (or that label), "failed" (the reason printed)
    or "interrupted", with its seconds."""
    started = time.perf_counter()
    try:
        execute(chapter, profile)
        status = finished
    except StudyError as error:
        status = "failed"
        print(error, file=sys.stderr, flush=True)
    except KeyboardInterrupt:
        status = "interrupted"
    return {"chapter": chapter.name, "status": status, "seconds": round(time.perf_counter() - started, 1)}


def planned_items(profile: str, names: list[str] | None, machine: Machine, gpus: int | None = None) -> list:
    """Every launch and stretch of work of ``profile``'s chapters on ``machine``, validated and timed
    (``helpers.plan``), from each chapter's defaults overridden by the profile."""
    from helpers.chapter_plans import items_of, reuse_across_chapters

    items = []
    for chapter in plan(profile, names, gpus=gpus, machine=machine):
        items += items_of(chapter.name, {**notebook_defaults(chapter.source), **chapter.parameters}, machine)
    return reuse_across_chapters(items)


def print_plan(parser: argparse.ArgumentParser, args) -> int:
    """``--plan``: print the plan of the profile on this or the described machine; exit 1 on a refusal."""
    from helpers.plan import describe_plan

    try:
        machine = machine_from_arguments(args)
        if args.profile == "gpu" and not machine.described and not machine.gpus:
            raise ValueError(
                "no GPU is visible here: describe the machine to plan for, e.g. --gpu-name "
                '"NVIDIA H100 80GB HBM3" --gpus 1 (or --gpu-list with its nvidia-smi output)'
            )
        profile = resolve_profile(args.profile, machine if machine.described else None)
        items = planned_items(profile, args.chapters, machine, None if machine.described else args.gpus)
    except (ValueError, OSError) as error:
        parser.error(str(error))
    print(f"profile {profile}")
    print(describe_plan(items, machine))
    return 1 if any(item.refusal for item in items) else 0


def print_missing(parser: argparse.ArgumentParser, args) -> int:
    """``--plan --missing``: what this machine, or the one ``--from-records`` names, still lacks for the
    profile, in steps of a short rental; nothing starts."""
    try:
        if args.from_records:
            identifier, machine = (
                args.from_records,
                Machine.from_fingerprint(stored_fingerprint(args.from_records)),
            )
        else:
            machine = Machine.here()
        profile = resolve_profile(args.profile, machine)
        identifier = args.from_records or ResultStore(profile).provenance_id
        chapters = plan(profile, args.chapters, gpus=args.gpus, machine=machine)
        items = planned_items(profile, args.chapters, machine, args.gpus)
    except (ValueError, OSError, ResultsError) as error:
        parser.error(str(error))
    print(describe_missing(missing_work(chapters, items, profile, identifier), profile, identifier))
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m helpers.study --profile auto``: execute the chapters, print a summary table."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--profile", default="auto", help="smoke, cpu, gpu or auto (default)")
    parser.add_argument("--chapters", nargs="*", help="chapter names, e.g. 01_single_device (default: all)")
    parser.add_argument(
        "--gpus",
        type=int,
        help="GPUs the multi-device chapters may use (default: all); with --gpu-name, "
        "the described machine's GPUs",
    )
    parser.add_argument("--force", action="store_true", help="rerun chapters even when current")
    parser.add_argument(
        "--from-records", metavar="MACHINE_ID",
        help="execute the chapters from that machine's stored records, measuring nothing (any machine)",
    )  # fmt: skip
    parser.add_argument("--time-limit-minutes", type=float, help="per-chapter limit (default: study.yml)")
    parser.add_argument("--price-per-hour", type=float, help="hourly price of this machine, for the summary")
    parser.add_argument(
        "--plan", action="store_true", help="list every launch and its estimated minutes; start nothing"
    )
    parser.add_argument(
        "--missing", action="store_true",
        help="with --plan: only what this machine (or --from-records ID) lacks, in steps of 9 minutes",
    )  # fmt: skip
    add_machine_arguments(parser, gpus=False)
    args = parser.parse_args(argv)
    if args.missing and not args.plan:
        parser.error("--missing goes with --plan")
    if args.plan:
        return print_missing(parser, args) if args.missing else print_plan(parser, args)
    if args.gpu_name or args.gpu_list:
        parser.error("--gpu-name and --gpu-list describe a machine for --plan; a study runs on this one")
    if args.price_per_hour is not None and args.price_per_hour < 0:
        parser.error("--price-per-hour must not be negative")
    if args.gpus is not None and args.gpus < 1:
        parser.error("--gpus must be at least 1")
    try:
        summary = run(
            args.profile, args.chapters, args.force, args.gpus, args.time_limit_minutes, args.from_records
        )
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
