"""Run the study: execute the chapters with papermill into ``book/chapters/`` (``make study``).

``notebooks/study.yml`` maps each profile to the parameters of each chapter: ``smoke`` (the notebooks'
own defaults), ``cpu`` (the whole study on a CPU-only machine) and ``gpu`` (the seed's experiment on the
visible GPUs); ``auto`` picks ``gpu`` when CUDA devices are visible, else ``cpu``.

A chapter whose notebook and parameters are unchanged since its executed copy was written is skipped;
its measurements are reused through ``helpers.results`` anyway, so a rerun after an interruption only
measures what is missing. Executed notebooks are written to a temporary file and renamed into place.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pandas as pd
import yaml

from helpers.paths import project_root
from helpers.results import canonical_json

PROFILES = ("smoke", "cpu", "gpu")


def notebooks_dir() -> Path:
    """``notebooks/``: the chapters' sources and ``study.yml``."""
    return project_root() / "notebooks"


def chapters_dir() -> Path:
    """``book/chapters/``: the executed chapters the book is built from."""
    return project_root() / "book" / "chapters"


@dataclass(frozen=True)
class Chapter:
    """One notebook to execute with its profile's parameters."""

    name: str
    source: Path
    output: Path
    parameters: dict

    def fingerprint(self) -> str:
        """Hash of the notebook's bytes and its parameters: equal means the executed copy is current."""
        digest = hashlib.sha256(self.source.read_bytes())
        digest.update(canonical_json(self.parameters).encode())
        return digest.hexdigest()[:16]

    def is_current(self) -> bool:
        """The executed copy exists, finished, and was made from this notebook and these parameters."""
        if not self.output.exists():
            return False
        study = nbformat.read(self.output, as_version=4).metadata.get("study", {})
        return study.get("fingerprint") == self.fingerprint() and study.get("status") == "finished"


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


def plan(profile: str, names: list[str] | None = None, config: Path | None = None) -> list[Chapter]:
    """The chapters to run, in order, with their parameters; unknown chapter names are refused."""
    sources = {path.stem: path for path in sorted(notebooks_dir().glob("[0-9][0-9]_*.ipynb"))}
    profiles = yaml.safe_load((config or notebooks_dir() / "study.yml").read_text())
    settings = profiles.get(profile) or {}
    if unknown := sorted(set(settings) - set(sources)):
        raise ValueError(f"study.yml profile {profile!r} names unknown chapters: {', '.join(unknown)}")
    if unknown := sorted(set(names or []) - set(sources)):
        raise ValueError(f"unknown chapter(s) {', '.join(unknown)}; known: {', '.join(sources)}")
    chosen = [name for name in sources if not names or name in names]
    return [
        Chapter(
            name=name,
            source=sources[name],
            output=chapters_dir() / f"{name}.ipynb",
            parameters={"results_run": profile, **(settings.get(name) or {})},
        )
        for name in chosen
    ]


def execute(chapter: Chapter, profile: str) -> None:
    """Run one chapter with papermill; the executed notebook replaces the old one only if it finished."""
    import papermill

    chapter.output.parent.mkdir(parents=True, exist_ok=True)
    partial = chapter.output.with_name(f".{chapter.name}.{os.getpid()}.partial.ipynb")
    try:
        papermill.execute_notebook(
            str(chapter.source),
            str(partial),
            parameters=chapter.parameters,
            cwd=str(chapter.source.parent),
            kernel_name="python3",
            progress_bar=True,
        )
        notebook = nbformat.read(partial, as_version=4)
        notebook.metadata["study"] = {
            "profile": profile,
            "parameters": chapter.parameters,
            "fingerprint": chapter.fingerprint(),
            "status": "finished",
        }
        nbformat.write(notebook, partial)
        os.replace(partial, chapter.output)
    finally:
        partial.unlink(missing_ok=True)


def run(profile: str, names: list[str] | None = None, force: bool = False) -> pd.DataFrame:
    """Run (or skip) every planned chapter; returns the summary table."""
    profile = resolve_profile(profile)
    chapters = plan(profile, names)
    rows = []
    for number, chapter in enumerate(chapters, 1):
        started = time.perf_counter()
        print(f"[{number}/{len(chapters)}] {chapter.name} ({profile})", flush=True)
        if not force and chapter.is_current():
            status = "skipped (current)"
        else:
            try:
                execute(chapter, profile)
                status = "finished"
            except Exception as error:  # one failed chapter is reported, the others still run
                status = f"failed: {type(error).__name__}"
                print(f"{chapter.name} failed: {error}", file=sys.stderr)
        rows.append(
            {
                "chapter": chapter.name,
                "status": status,
                "seconds": round(time.perf_counter() - started, 1),
                "output": str(chapter.output.relative_to(project_root())),
            }
        )
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    """``python -m helpers.study --profile auto``: execute the chapters, print a summary table."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--profile", default="auto", help="smoke, cpu, gpu or auto (default)")
    parser.add_argument("--chapters", nargs="*", help="chapter names, e.g. 01_single_device (default: all)")
    parser.add_argument("--force", action="store_true", help="rerun chapters even when current")
    args = parser.parse_args(argv)
    try:
        summary = run(args.profile, args.chapters, args.force)
    except ValueError as error:
        parser.error(str(error))
    print(summary.to_string(index=False))
    return 1 if summary["status"].str.startswith("failed").any() else 0


if __name__ == "__main__":
    sys.exit(main())
