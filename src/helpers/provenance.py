"""Where the book's numbers came from: chapter banners, the editions the book shows, the provenance page.

The study runner writes each profile's executed chapters into ``book/chapters/<profile>/`` (an edition) and
stores, in each one's metadata, the profile, the finishing time, the duration, the hardware fingerprint of
the machine that measured its records and, for a chapter executed from those records elsewhere, the
machine that executed it and when the records were measured; it keeps each chapter's last fresh duration
per machine. ``python -m helpers.provenance`` picks, per chapter, the edition the book shows (``auto``: the
GPU edition where it was executed, else the CPU edition) into ``book/_toc.yml``, and writes
``book/provenance.md`` and the intro's edition note ``book/edition.md``; ``make book`` runs it first.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

from helpers import reference_speed
from helpers.book_answer import answer_note
from helpers.hardware import ANSI_ESCAPE, describe, fingerprint
from helpers.paths import project_root, results_dir
from helpers.results import ResultStore, read_json, short_hash, stored_machine_id
from helpers.stats import listed, plural
from helpers.topology import describe_topology, seen_topology

EDITIONS = {"gpu": "GPU edition", "cpu": "CPU edition", "smoke": "Smoke run"}  # by profile (results run)


def edition_name(profile: str) -> str:
    """The name of a profile's edition: "GPU edition" for ``gpu``, and so on."""
    return EDITIONS.get(profile, f"Profile {profile}")


def days(stamps) -> str:
    """ISO times as the day, or the first and last day, they fall on ("2026-11-25 to 2026-11-26")."""
    found = sorted({stamp[:10] for stamp in stamps})
    if not found:
        return "no day recorded"
    return found[0] if len(found) == 1 else f"{found[0]} to {found[-1]}"


def edition_line(store: ResultStore) -> str:
    """Every chapter's badge, under its answer: its edition, the machine that measured what it shows (its
    GPUs and its host, which sets host-bound steps and Gloo's links) and on which days (the records it
    read), for a page executed from those records elsewhere, where (a timing taken while executing, such as
    chapter 7's pricing, is that machine's), and a link to the intro's list of every chapter's hardware."""
    line = (f"**{edition_name(store.folder.name)}** · measured on {describe(store.hardware)}, "
            f"{days(store.measured_at)}")  # fmt: skip
    if store.records_of:
        line += f" · executed from those records on {describe(fingerprint())}"
    return line + " · {ref}`every chapter's hardware <where-the-numbers-come-from>`"


def toc_chapters() -> list[Path]:
    """Executed chapter notebooks in table-of-contents order (all of book/chapters/ without a toc)."""
    toc_path = project_root() / "book" / "_toc.yml"
    if not toc_path.exists():
        return sorted((project_root() / "book" / "chapters").glob("*/[0-9][0-9]_*.ipynb"))
    toc = yaml.safe_load(toc_path.read_text())
    files = [entry["file"] for entry in toc.get("chapters", [])]
    return [project_root() / f"{name}.ipynb" for name in files if name.startswith("book/chapters/")]


EDITION_CHOICES = ("auto", "gpu", "cpu")
TOC_HEADER = (
    "# Table of contents, written by `python -m helpers.provenance --edition EDITION` (make book): each\n"
    "# chapter from the edition chosen (auto: the GPU edition where it was executed, else the CPU edition).\n"
    "# Paths are relative to the repository root, which is the book's root.\n"
)


def study_metadata(path: Path) -> dict:
    """The ``study`` metadata the runner wrote into an executed chapter ({} where it is not there): read as
    the JSON it is, since every chapter's kernel imports this module and nbformat's validator takes a
    second to import."""
    return json.loads(path.read_text())["metadata"].get("study", {}) if path.exists() else {}


def finished(path: Path) -> bool:
    """Whether ``path`` is a chapter the study runner executed to the end."""
    return study_metadata(path).get("status") == "finished"


def published(edition: str = "auto") -> list[Path]:
    """Per chapter (``notebooks/NN_*.ipynb``, in order), the executed copy the book shows: ``auto``, the GPU
    edition where it finished, else the CPU edition; ``gpu`` or ``cpu``, that edition only."""
    if edition not in EDITION_CHOICES:
        raise ValueError(f"edition must be one of {', '.join(EDITION_CHOICES)}, not {edition!r}")
    folder = project_root() / "book" / "chapters"
    chosen = []
    for source in sorted((project_root() / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        gpu, cpu = (folder / profile / source.name for profile in ("gpu", "cpu"))
        chosen.append({"auto": gpu if finished(gpu) else cpu, "gpu": gpu, "cpu": cpu}[edition])
    return chosen


def write_toc(edition: str = "auto") -> Path:
    """``book/_toc.yml``: the intro, the ``published`` chapters, the reproduce and provenance pages."""
    root = project_root()
    pages = [path.relative_to(root).with_suffix("").as_posix() for path in published(edition)]
    pages += ["book/reproduce", "book/provenance"]
    text = TOC_HEADER + "format: jb-book\nroot: book/intro\nchapters:\n"
    text += "".join(f"  - file: {page}\n" for page in pages)
    return write_if_changed(root / "book" / "_toc.yml", text)


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
        matrix = ANSI_ESCAPE.sub("", hardware["gpu_topology"])  # nvidia-smi underlines its header row
        lines += ["GPU topology (`nvidia-smi topo -m`):", "", "```text", matrix, "```", ""]
    return lines


def reference_section(identifier: str) -> list[str]:
    """Markdown lines on the machine's speed across its records (``helpers.reference_speed``): per figure
    the lowest, median and highest reference over the records of every run that carry one, so a reader
    sees how far one machine's speed moved between the measurements a chapter compares."""
    records = [
        record
        for folder in sorted(results_dir().glob("*"))
        for path in sorted((folder / "records").glob("*.json"))
        if (record := read_json(path)) and record.get("provenance_id") == identifier
    ]
    carrying = [record["reference"] for record in records if record.get("reference")]
    references = reference_speed.distinct(records)
    if not records:
        return []
    if not references:
        count = len(records)
        every = "its one record predates" if count == 1 else f"all {count:,} of its records predate"
        return [f"Speed at measurement: not recorded; {every} the reference speed (a fixed matrix product "
                "and memory copy timed before each new record, `helpers.reference_speed`; see Reproduce the "
                "study, section 5).", ""]  # fmt: skip
    one = len(carrying) == 1
    lines = [
        f"Speed at measurement: {len(carrying)} of its {len(records)} records "
        f"{'carries' if one else 'carry'} the reference speed timed at most a minute before "
        f"{'it' if one else 'them'}, {len(references)} distinct {plural(len(references), 'reference')} "
        "(`helpers.reference_speed`: a fixed workload, the same in every run).",
        "",
        "| reference | references | lowest | median | highest | highest / lowest |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name, figures in reference_speed.spread(references).items():
        label = reference_speed.FIGURE_NAMES.get(name, name)
        lines.append(
            f"| {label} | {figures['records']} | {figures['lowest']:.3g} | "
            f"{figures['median']:.3g} | {figures['highest']:.3g} | {1 + figures['gap']:.2f}× |"
        )
    return [*lines, ""]


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
            "speed-up from more devices can appear, NCCL does not run, and every multi-GPU figure is a "
            "prediction (chapter 5)."
        )
    if gpus == 1:
        return (
            "With one GPU, single-device and Gloo measurements run on it and NCCL can start only one rank "
            "(it refuses two ranks on one GPU); several ranks share the GPU, so they show the mechanics and "
            "their overhead, not a speed-up: multi-GPU figures are predictions (chapter 5)."
        )
    links = describe_topology(seen_topology(hardware)) if hardware.get("gpu_topology") else f"{gpus} GPUs"
    return f"With {links}, the multi-device chapters measure real speed-ups on these links."


def quoted_machines(shown: set[str] | None = None) -> dict[str, dict]:
    """Machines whose records the book quotes but that ran none of its chapters: every machine of every
    study run in ``data/results/`` (smoke and test runs aside) and of every ``make gpu-check`` record,
    those in ``shown`` left out, as {id: {"hardware", "sources": ["`gpu` run: 172 records", ...]}}.
    Chapter 5 reads the single-GPU steps of a ``gpu`` run and of gpu-check, whichever machine runs it."""
    found: dict[str, dict] = {}
    root = results_dir()
    runs = sorted(
        p for p in root.glob("*") if p.is_dir() and p.name != "smoke" and not p.name.startswith("test-")
    )
    for run in runs:
        if run.name == "gpu-check":
            for path in sorted(run.glob("*.json")):
                record = read_json(path) if not path.name.startswith("key-averages-") else None
                if record and record.get("hardware"):
                    entry = found.setdefault(short_hash(record["hardware"]), {"hardware": record["hardware"],
                                                                              "sources": []})  # fmt: skip
                    entry["sources"].append(f"`make gpu-check` ({path.name})")
            continue
        counts: dict[str, int] = {}
        for path in (run / "records").glob("*.json"):
            record = read_json(path)
            if record:
                counts[record["provenance_id"]] = counts.get(record["provenance_id"], 0) + 1
        for path in sorted((run / "provenance").glob("*.json")):
            stored = read_json(path)
            if stored and counts.get(stored["provenance_id"]):
                entry = found.setdefault(
                    stored["provenance_id"], {"hardware": stored["hardware"], "sources": []}
                )
                entry["sources"].append(f"`{run.name}` run: {counts[stored['provenance_id']]:,} records")
    return {identifier: entry for identifier, entry in found.items() if identifier not in (shown or set())}


def machine_of(study: dict) -> tuple[str, dict | None]:
    """The id and hardware of the machine that measured an executed chapter (its ``study`` metadata): the
    machine whose records it was executed from, or the provenance id its profile's records were stored
    under (a restarted virtual machine keeps the id it was first stored under:
    ``results.machine_identity``), else the hash of its fingerprint."""
    hardware, profile = study.get("hardware"), study.get("profile")
    if not hardware:
        return "unknown", None
    if study.get("records_of"):
        return study["records_of"], hardware
    stored = stored_machine_id(results_dir() / profile, hardware) if profile else None
    return stored or short_hash(hardware), hardware


def executed_where(study: dict) -> str:
    """How a chapter was executed: where it measured, or from which machine's records on which machine."""
    if study.get("records_of"):
        return f"from the stored records, on {describe(study['executed_on'])}"
    return "on the machine that measured it"


def measured_when(study: dict) -> str:
    """The days its records were measured on (UTC), or an em dash when the metadata does not say."""
    return days(study["measured_between"]) if study.get("measured_between") else "—"


def chapter_studies() -> list[tuple[Path, dict]]:
    """The book's chapters (``toc_chapters``) with their ``study`` metadata ({} where not executed yet)."""
    return [(path, study_metadata(path)) for path in toc_chapters()]


def chapter_list(numbers: list[int]) -> str:
    """[2, 3, 4, 7] as "Chapters 2, 3, 4 and 7"; [1] as "Chapter 1"."""
    return f"Chapter{'' if len(numbers) == 1 else 's'} {listed(numbers)}"


def edition_note() -> str:
    """The intro's first screen: which chapters were measured on what hardware (and executed where), what
    that hardware can show, and the GPU steps chapter 5 reads from another machine."""
    machines, groups, fifth = {}, {}, None
    for path, study in chapter_studies():
        identifier, hardware = machine_of(study)
        if not hardware:
            continue
        machines.setdefault(identifier, hardware)
        label = (
            identifier,
            edition_name(study.get("profile", "?")),
            executed_where(study),
            measured_when(study),
        )
        groups.setdefault(label, []).append(int(path.stem[:2]))
        fifth = identifier if path.stem.startswith("05_") else fifth
    if not machines:
        return "```{note}\nNo chapter of this edition has been executed yet.\n```\n"
    lines = ["```{note}"]
    for (identifier, edition, where, when), numbers in sorted(
        groups.items(), key=lambda group: min(group[1])
    ):
        named = f"{describe(machines[identifier])} (`{identifier}`)"
        on = "" if when == "—" else f" on {when}"
        lines.append(f"- **{chapter_list(numbers)}** ({edition}): measured on {named}{on}, executed {where}.")
    said: dict[str, list[str]] = {}  # machines that can show the same, named together
    for hardware in machines.values():
        said.setdefault(can_and_cannot(hardware), []).append(describe(hardware))
    lines += ["", *[f"- *{'; '.join(names)}*: {text}" for text, names in said.items()], ""]
    shown = {fifth} if fifth else set()
    gpus = {i: entry for i, entry in quoted_machines(shown).items() if entry["hardware"].get("gpus")}
    if gpus and fifth:
        named = "; ".join(
            f"the {describe(entry['hardware'])} of "
            + chapter_list([n for (i, *_), ns in groups.items() if i == identifier for n in ns]).lower()
            if identifier in machines else f"`{identifier}`, {describe(entry['hardware'])}"
            for identifier, entry in gpus.items()
        )  # fmt: skip
        lines += [f"Chapter 5 also reads single-GPU steps measured on another machine ({named}): it checks "
                  "its roofline against them, and for that GPU they replace the roofline in its predictions.",
                  ""]  # fmt: skip
    lines += ["The [provenance page](provenance.md) names every machine in full; "
              "[Reproduce the study](reproduce.md) gets you the same book with your hardware's numbers.",
              "```", ""]  # fmt: skip
    return "\n".join(lines)


def minute(timestamp: str | None) -> str:
    """An ISO time in UTC as the chapters table shows it, to the minute: "2026-11-28 01:22"; "?" where
    none was stored."""
    return timestamp[:16].replace("T", " ") if timestamp else "?"


def _short_machine(hardware: dict) -> str:
    """A machine as the chapters table names it: its GPUs, or its CPU where it has none ("1x NVIDIA H200
    (140 GiB)"; "2-core AMD EPYC, no GPU"); the Machines section below describes it in full."""
    return describe(hardware).split(";")[0]


def provenance_page() -> str:
    """The Markdown of ``book/provenance.md``, from the executed chapters' metadata: what each chapter
    shows and where it was measured, then how each page was made, two tables narrow enough for the column
    (one of eight columns scrolled its machines out of view)."""
    shows, made, machines = [], [], {}
    for path, study in chapter_studies():
        if not study:
            shows.append(f"| {path.stem} | not executed yet | | |")
            made.append(f"| {path.stem} | not executed yet | | | |")
            continue
        identifier, hardware = machine_of(study)
        if hardware:
            machines.setdefault(identifier, hardware)
        profile = study.get("profile", "?")
        shows.append(
            f"| {path.stem} | {edition_name(profile)} (`{profile}`) | "
            f"{_short_machine(hardware) if hardware else '?'} (`{identifier}`) | {measured_when(study)} |"
        )
        made.append(
            f"| {path.stem} | {executed_where(study)} | {minute(study.get('finished_at'))} | "
            f"{study.get('seconds', '?')} s | {fresh_seconds(profile, identifier, path.stem)} |"
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
        "Each chapter shows one edition: the GPU edition where one was executed, else the CPU edition",
        "(`python -m helpers.provenance --edition cpu` builds the other). *measured on* is the machine whose",
        "records the chapter shows (the Machines section below describes each in full), and *records",
        "measured* the days they were measured.",
        "",
        "| chapter | edition | measured on | records measured (UTC) |",
        "| --- | --- | --- | --- |",
        *shows,
        "",
        "A chapter executed *from the stored records* ran on another machine and measured nothing.",
        "*duration* is the executed notebook's own run, which reuses finished records; *fresh* is the last",
        "run on the measuring machine that measured everything anew (what a first run on such a machine",
        "costs).",
        "",
        "| chapter | executed | finished (UTC) | duration | fresh |",
        "| --- | --- | --- | --- | --- |",
        *made,
        "",
        "## Machines",
        "",
    ]
    for identifier, hardware in machines.items():
        lines += hardware_section(identifier, hardware) + reference_section(identifier)
    if not machines:
        lines += ["No chapter has been executed by the study runner yet.", ""]
    quoted = quoted_machines(set(machines))
    if quoted:
        lines += ["## Machines whose records are quoted", "",
                  "These machines ran none of the chapters above, but measured records that a chapter reads: "
                  "an earlier chapter's runs in the same edition's results (chapter 5 prices chapter 1's "
                  "training runs, for one), and float32 single-GPU step times (from runs of the `gpu` "
                  "profile and from `make gpu-check`, on any machine), which chapter 5 checks its roofline "
                  "against and uses in place of the roofline for that GPU.", ""]  # fmt: skip
        for identifier, entry in quoted.items():
            lines += hardware_section(identifier, entry["hardware"]) + reference_section(identifier)
            lines += ["Records: " + "; ".join(entry["sources"]) + ".", ""]
    return "\n".join(lines)


def write_if_changed(path: Path, content: str) -> Path:
    """Write ``content`` to ``path`` only when it differs, to keep rebuilds quiet."""
    if not path.exists() or path.read_text() != content:
        path.write_text(content)
    return path


def write_provenance_page(path: Path | None = None) -> Path:
    """Write ``book/provenance.md``, and the intro's ``book/edition.md`` and short answer
    (``book_answer.answer_note``, ``book/answer.md``) beside it, for the chapters the table of contents
    shows."""
    path = path or project_root() / "book" / "provenance.md"
    write_if_changed(path.with_name("edition.md"), edition_note())
    write_if_changed(path.with_name("answer.md"), answer_note(chapter_studies(), path.parent))
    return write_if_changed(path, provenance_page())


def publish(edition: str = "auto") -> Path:
    """Choose the chapters' editions (``write_toc``), then write the pages that describe them."""
    write_toc(edition)
    return write_provenance_page()


def main(argv: list[str] | None = None) -> int:
    """``python -m helpers.provenance``: the table of contents, book/provenance.md, book/edition.md and
    book/answer.md."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument(
        "--edition", default="auto", choices=EDITION_CHOICES,
        help="auto (default): each chapter's GPU edition where executed, else its CPU edition",
    )  # fmt: skip
    args = parser.parse_args(argv)
    print(f"wrote {publish(args.edition)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
