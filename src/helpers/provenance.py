"""Where the book's numbers came from: chapter banners and the generated provenance page.

The study runner stores, in each executed chapter's metadata, the profile, the finishing time, the
duration and the hardware fingerprint of the machine that ran it. ``python -m helpers.provenance``
turns that into ``book/provenance.md``; ``make book`` runs it before building.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
import yaml
from IPython.display import Markdown

from helpers.hardware import describe
from helpers.paths import project_root
from helpers.results import ResultStore, short_hash


def banner(store: ResultStore) -> Markdown:
    """The line a chapter opens with: the hardware and the profile (results run) of its outputs."""
    return Markdown(f"**Measured on** {describe(store.hardware)} · **profile** `{store.folder.name}`")


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


def provenance_page() -> str:
    """The Markdown of ``book/provenance.md``, from the executed chapters' metadata."""
    rows, machines = [], {}
    for path in toc_chapters():
        if not path.exists():
            rows.append(f"| {path.stem} | not executed yet | | | |")
            continue
        study = nbformat.read(path, as_version=4).metadata.get("study", {})
        hardware = study.get("hardware")
        identifier = short_hash(hardware) if hardware else "unknown"
        if hardware:
            machines[identifier] = hardware
        rows.append(
            f"| {path.stem} | `{study.get('profile', '?')}` | {study.get('finished_at', '?')} | "
            f"{study.get('seconds', '?')} s | {describe(hardware) if hardware else '?'} (`{identifier}`) |"
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
        "| chapter | profile | finished (UTC) | duration | machine |",
        "| --- | --- | --- | --- | --- |",
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


def write_provenance_page(path: Path | None = None) -> Path:
    """Write ``book/provenance.md`` (only when its content changed, to keep rebuilds quiet)."""
    path = path or project_root() / "book" / "provenance.md"
    content = provenance_page()
    if not path.exists() or path.read_text() != content:
        path.write_text(content)
    return path


def main() -> int:
    """``python -m helpers.provenance``: regenerate book/provenance.md."""
    print(f"wrote {write_provenance_page()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
