"""Where the book's numbers came from: chapter banners and the generated provenance page.

The study runner stores, in each executed chapter's metadata, the profile, the finishing time, the
duration and the hardware fingerprint of the machine that ran it, and keeps each chapter's last fresh
duration per machine. ``python -m helpers.provenance`` turns that into ``book/provenance.md`` and the
intro's edition note ``book/edition.md``; ``make book`` runs it before building.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
import yaml
from IPython.display import Markdown

from helpers.hardware import describe, describe_topology, seen_topology
from helpers.paths import project_root, results_dir
from helpers.results import ResultStore, read_json, short_hash


def banner(store: ResultStore) -> Markdown:
    """What a chapter opens with: the hardware and the profile (results run) of its outputs, and what
    measurements on that hardware can and cannot show (``can_and_cannot``)."""
    return Markdown(
        f"**Measured on** {describe(store.hardware)} · **profile** `{store.folder.name}`\n\n"
        f"> {can_and_cannot(store.hardware)}"
    )


def toc_chapters() -> list[Path]:
    """Executed chapter notebooks in table-of-contents order (all of book/chapters/ without a toc)."""
    toc_path = project_root() / "book" / "_toc.yml"
    if not toc_path.exists():
        return sorted((project_root() / "book" / "chapters").glob("[0-9][0-9]_*.ipynb"))
    toc = yaml.safe_load(toc_path.read_text())
    files = [entry["file"] for entry in toc.get("chapters", [])]
    return [project_root() / f"{name}.ipynb" for name in files if name.startswith("book/chapters/")]


def gib(value: int | None) -> str:
    """Bytes as GiB with one decimal, or an em dash."""
    return "—" if value is None else f"{value / 2**30:.1f} GiB"


def hardware_section(identifier: str, hardware: dict) -> list[str]:
    """Markdown lines describing one machine's fingerprint."""
    gpus = ", ".join(
        f"{g['name']} ({gib(g['memory_bytes'])}, sm {g['compute_capability']})" for g in hardware["gpus"]
    )
    cores = f"{hardware['usable_cores']} usable of {hardware['cpu_cores']} cores"
    lines = [
        f"### Machine `{identifier}`",
        "",
        "| | |",
        "| --- | --- |",
        f"| CPU | {hardware['cpu_model']}, {cores} |",
        f"| memory | {gib(hardware['memory_bytes'])} |",
        f"| GPUs | {gpus or 'none'} |",
        f"| driver | {hardware['driver'] or '—'} |",
        f"| CUDA (torch build) | {hardware['cuda'] or '—'} |",
        f"| NCCL (torch build) | {hardware['nccl'] or '—'} |",
        f"| torch | {hardware['torch']} |",
        f"| Python | {hardware['python']} |",
        f"| system | {hardware['platform']} |",
        "",
    ]
    if hardware.get("gpu_topology"):
        lines += ["GPU topology (`nvidia-smi topo -m`):", "", "```text", hardware["gpu_topology"], "```", ""]
    return lines


def fresh_seconds(profile: str, identifier: str, chapter: str) -> str:
    """The chapter's last fresh duration on that machine (no record reused), or an em dash."""
    path = results_dir() / profile / "durations.json"
    durations = (read_json(path) or {}) if path.exists() else {}
    fresh = durations.get(identifier, {}).get(chapter, {}).get("fresh")
    return f"{fresh['seconds']} s" if fresh else "—"


def can_and_cannot(hardware: dict) -> str:
    """What measurements on this hardware can show about multi-GPU training, and what they cannot."""
    gpus = len(hardware.get("gpus", []))
    cores = hardware["usable_cores"]
    if gpus == 0:
        return (
            f"With no GPU, every rank and replica shares the same {cores} cores and one memory system: the "
            "book shows the mechanics of data parallelism exactly (the bytes moved, the collectives' "
            "results, what a rank does and when it waits) and what they cost on this machine, but no "
            "speed-up from more devices can appear, NCCL does not run, and every GPU figure is a "
            "prediction (chapter 5)."
        )
    if gpus == 1:
        return (
            "With one GPU, single-device and Gloo measurements run on it and NCCL runs one rank (it refuses "
            "two ranks on one GPU); several ranks share the GPU, so they show the mechanics and their "
            "overhead, not a speed-up: multi-GPU figures are predictions (chapter 5)."
        )
    links = describe_topology(seen_topology(hardware)) if hardware.get("gpu_topology") else f"{gpus} GPUs"
    return f"With {links}, the multi-device chapters measure real speed-ups on these links."


def edition_note() -> str:
    """The intro's first screen: on what hardware this edition was measured, and what that can show."""
    machines = {}
    for path in toc_chapters():
        if path.exists():
            hardware = nbformat.read(path, as_version=4).metadata.get("study", {}).get("hardware")
            if hardware:
                machines[short_hash(hardware)] = hardware
    if not machines:
        return "```{note}\nNo chapter of this edition has been executed yet.\n```\n"
    lines = ["```{note}", "**This edition was measured on** "
             + "; ".join(f"{describe(h)} (`{i}`)" for i, h in machines.items()) + "."]  # fmt: skip
    lines += ["", *[can_and_cannot(h) for h in machines.values()], "",
              "The [provenance page](provenance.md) names every machine in full; "
              "[Reproduce the study](reproduce.md) gets you the same book with your hardware's numbers.",
              "```", ""]  # fmt: skip
    return "\n".join(lines)


def provenance_page() -> str:
    """The Markdown of ``book/provenance.md``, from the executed chapters' metadata."""
    rows, machines = [], {}
    for path in toc_chapters():
        if not path.exists():
            rows.append(f"| {path.stem} | not executed yet | | | | |")
            continue
        study = nbformat.read(path, as_version=4).metadata.get("study", {})
        hardware = study.get("hardware")
        identifier = short_hash(hardware) if hardware else "unknown"
        if hardware:
            machines[identifier] = hardware
        profile = study.get("profile", "?")
        rows.append(
            f"| {path.stem} | `{profile}` | {study.get('finished_at', '?')} | "
            f"{study.get('seconds', '?')} s | {fresh_seconds(profile, identifier, path.stem)} | "
            f"{describe(hardware) if hardware else '?'} (`{identifier}`) |"
        )
    lines = [
        "# Provenance",
        "",
        "Every chapter of this book is a notebook executed by `make study`; this page is generated from the",
        "metadata the study runner stored in each executed chapter (`python -m helpers.provenance`). The",
        "measurements themselves are in `data/results/<profile>/records/`, each with the id of the machine",
        "that measured it.",
        "",
        "## Chapters",
        "",
        "*duration* is the executed notebook's own run, which reuses finished records; *fresh* is the last",
        "run on that machine that measured everything anew (what a first run on such a machine costs).",
        "",
        "| chapter | profile | finished (UTC) | duration | fresh | machine |",
        "| --- | --- | --- | --- | --- | --- |",
        *rows,
        "",
        "## Machines",
        "",
    ]
    for identifier, hardware in machines.items():
        lines += hardware_section(identifier, hardware)
    if not machines:
        lines += ["No chapter has been executed by the study runner yet.", ""]
    return "\n".join(lines)


def write_if_changed(path: Path, content: str) -> Path:
    """Write ``content`` to ``path`` only when it differs, to keep rebuilds quiet."""
    if not path.exists() or path.read_text() != content:
        path.write_text(content)
    return path


def write_provenance_page(path: Path | None = None) -> Path:
    """Write ``book/provenance.md`` and the intro's ``book/edition.md`` beside it."""
    path = path or project_root() / "book" / "provenance.md"
    write_if_changed(path.with_name("edition.md"), edition_note())
    return write_if_changed(path, provenance_page())


def main() -> int:
    """``python -m helpers.provenance``: regenerate book/provenance.md."""
    print(f"wrote {write_provenance_page()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
