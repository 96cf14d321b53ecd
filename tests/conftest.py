"""Shared fixtures: the real FSDD recordings, synthetic clips of their shape, and throwaway folders for caches
and results."""

import functools
import os
import shutil
import tempfile
import uuid
from pathlib import Path

import psutil
import pytest
import torch
from torch.utils.data import TensorDataset

from helpers import data
from helpers.data import DatasetError, find_recordings

# Why ``recordings`` skips: the one skip a shared launch may take (``lost_shared_launch``).
NO_RECORDINGS = "FSDD recordings not available"


@pytest.fixture(scope="session")
def recordings() -> Path:
    """The real FSDD v1.0.10 recordings (FSDD_DIR, or data/fsdd/); required on CI, skipped elsewhere."""
    try:
        return find_recordings()
    except DatasetError as error:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"{NO_RECORDINGS}: {error}")


def link_or_copy(source: str, destination: str) -> None:
    """A hard link to ``source`` (no bytes copied), or a copy where the file system refuses links."""
    try:
        os.link(source, destination)
    except OSError:
        shutil.copy2(source, destination)


def file_states(folder: Path) -> dict:
    """Size and modification time of every file in ``folder``: what writing into one changes."""
    return {entry.name: (entry.stat().st_size, entry.stat().st_mtime_ns) for entry in os.scandir(folder)}


def own(path: Path) -> Path:
    """``path`` made a file of its own, no longer a hard link to a real recording: call before writing
    into a file of ``recordings_copy`` (removing or renaming one needs nothing)."""
    private = path.with_name(f".{path.name}.own")
    shutil.copy2(path, private)
    os.replace(private, path)
    return path


@pytest.fixture
def recordings_copy(recordings, tmp_path) -> Path:
    """A private folder of the recordings that a test may damage: hard links to the real files (3,000
    copies took most of each data test), so a test must ``own`` a file before writing into it. Whether
    the real recordings were written through a link is checked after every test."""
    copy = tmp_path / "recordings"
    before = file_states(recordings)
    shutil.copytree(recordings, copy, copy_function=link_or_copy)
    yield copy
    written = sorted(name for name, state in file_states(recordings).items() if before.get(name) != state)
    assert not written, f"the test wrote into the real recordings through a hard link: {written[:10]}"


@pytest.fixture(scope="session")
def fsdd(recordings, tmp_path_factory):
    """The decoded dataset, cached in a session-private folder."""
    from helpers.data import load_fsdd

    return load_fsdd(recordings, cache_dir=tmp_path_factory.mktemp("cache"))


WORKER_MODULES = (
    "torch.distributed.run", "helpers.torchrun", "helpers.ddp", "helpers.lightning_ddp",
    "helpers.collectives.tasks", "helpers.sharding.tasks", "helpers.advise.validate",
)  # fmt: skip
# Launches inherit the test's environment, and an orphaned worker keeps it: this variable tells one
# test's launches from any other run's (a notebook or another test session running beside it).
TEST_TAG = "HELPERS_TEST_TAG"


def worker_processes(tag: str) -> list:
    """Processes of this study's launches (torchrun and every worker module) started under ``tag``
    that are still alive."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        command = " ".join(process.info["cmdline"] or [])
        if not any(module in command for module in WORKER_MODULES):
            continue
        try:
            if process.environ().get(TEST_TAG) == tag:
                found.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied):  # ended meanwhile, or not ours
            continue
    return found


@pytest.fixture
def no_leftovers(monkeypatch):
    """Fails the test when a launch it started left a process behind."""
    tag = uuid.uuid4().hex
    monkeypatch.setenv(TEST_TAG, tag)
    yield tag
    assert not worker_processes(tag), "a launch left processes behind"


# The fixtures that launch once for many tests (issue 39), by name: a test reading one must not skip.
SHARED_LAUNCHES: set[str] = set()


def shared_launch(scope: str = "session"):
    """A fixture that launches once for the tests that only read its run. Its launches run under a tag of
    their own (the environment restored after) and must leave no process behind (``no_leftovers`` does
    this per test); and a test that reads it fails, rather than skips, when it does not run
    (``pytest_runtest_makereport``), so that sharing a launch never quietly loses its assertions."""

    def register(function):
        @functools.wraps(function)
        def launched(*args, **kwargs):
            tag = uuid.uuid4().hex
            with pytest.MonkeyPatch.context() as patch:
                patch.setenv(TEST_TAG, tag)
                result = function(*args, **kwargs)
            assert not worker_processes(tag), f"{function.__name__} left processes behind"
            return result

        SHARED_LAUNCHES.add(function.__name__)
        return pytest.fixture(scope=scope)(launched)

    return register


def lost_shared_launch(report: pytest.TestReport, fixtures: list[str]) -> str | None:
    """Why ``report`` must fail instead of skip: it reads a shared launch that did not run, for a reason
    other than ``NO_RECORDINGS``; None when it ran, or took no shared launch."""
    shared = sorted(SHARED_LAUNCHES.intersection(fixtures))
    if not (report.skipped and shared):
        return None
    reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    if NO_RECORDINGS in reason:
        return None
    return f"the shared launch {', '.join(shared)} did not run ({reason}): its tests' assertions are lost"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    lost = lost_shared_launch(report, getattr(item, "fixturenames", []))
    if lost:
        report.outcome, report.longrepr = "failed", lost
    return report


# The two-rank LinearNet run the launcher's tests and the Lightning tests both launch.
LAUNCH_CONFIG = dict(
    backend="gloo", device="cpu", model="LinearNet", seed=0, train_samples=40, test_samples=20,
    global_batch_size=20, epochs=2, optimizer="adam", lr=1e-3, bucket_cap_mb=25, timeout_seconds=60,
)  # fmt: skip


@shared_launch()
def plain_launch(recordings, tmp_path_factory) -> tuple[list[dict], list[Path]]:
    """``LAUNCH_CONFIG`` launched once on two ranks with no output folder given, so that the launcher
    makes a temporary one: the results, and what is left in the temporary folders' parent after it (the
    launcher's test reads the second, Lightning's parity test the first). It must leave no process
    behind."""
    from helpers import launch

    parent = tmp_path_factory.mktemp("temporary")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tempfile, "tempdir", str(parent))
        results = launch.launch(LAUNCH_CONFIG, 2, time_limit_seconds=120)
    return results, sorted(parent.iterdir())


@shared_launch()
def two_node_launch(recordings, tmp_path_factory) -> tuple[Path, list[dict]]:
    """One launch of two torchrun "nodes" of one CPU rank each on this machine (its folder and results),
    shared by the tests that only read it; it must leave no process behind."""
    from helpers import launch

    config = dict(
        backend="gloo", device="cpu", model="LinearNet", seed=0, train_samples=8, test_samples=4,
        global_batch_size=4, epochs=1, optimizer="sgd", lr=0.1, bucket_cap_mb=25, timeout_seconds=60,
    )  # fmt: skip
    output = tmp_path_factory.mktemp("two-nodes")
    return output, launch.launch(config, 2, nodes=2, time_limit_seconds=120, output=output)


@pytest.fixture(scope="session")
def clips():
    """20 synthetic clips of FSDD's shape: enough for a step, without the recordings."""
    generator = torch.Generator().manual_seed(0)
    return TensorDataset(
        torch.randn(20, 1, data.CLIP_SAMPLES, generator=generator) * 0.1,
        torch.randint(0, 10, (20,), generator=generator),
    )


def small_texts(figure, drawn: bool = False) -> list[tuple[str, float]]:
    """Every visible text of ``figure`` (titles, labels, ticks, legends, bar labels) set smaller than
    ``plotting.SMALLEST_POINTS``, as (text, points); ``drawn``: the figure was just drawn as it stands (a
    PNG of it saved), so its tick labels exist without drawing it again."""
    from matplotlib.text import Text

    from helpers.plotting import SMALLEST_POINTS

    if not drawn:
        figure.canvas.draw()  # tick labels exist once drawn
    return [
        (text.get_text(), text.get_fontsize())
        for text in figure.findobj(Text)
        if text.get_visible()
        and (text.axes is None or text.axes.get_visible())
        and text.get_text().strip()
        and text.get_fontsize() < SMALLEST_POINTS
    ]


@pytest.fixture(autouse=True)
def legible_figures():
    """No figure a test draws sets text too small to read where a phone shows the column at half size, and
    its phone layout (``phone.phone_layout``) keeps that text at 9 px on a phone and puts the figure back."""
    import matplotlib.pyplot as plt

    from helpers import phone
    from helpers.plotting import setup_style

    setup_style()  # the book's sizes, as every chapter sets them
    before = set(plt.get_fignums())
    yield
    for number in sorted(set(plt.get_fignums()) - before):
        figure = plt.figure(number)
        desktop = phone.png(figure)  # each PNG draws the figure: its texts are read from that drawing
        small = small_texts(figure, drawn=True)
        with phone.phone_layout(figure):
            phone_png = phone.png(figure)
            phone_small = small_texts(figure, drawn=True)
        restored = phone.png(figure)
        phone_width = phone.png_width(phone_png)
        plt.close(number)
        assert not small, f"text under {small[0][1]} pt, too small for a phone: {small[:3]}"
        assert not phone_small, f"text under {phone_small[0][1]} pt in the phone layout: {phone_small[:3]}"
        assert restored == desktop, "the phone layout left the figure changed"
        assert phone_width <= phone.PHONE_PIXELS, (
            f"the phone layout is {phone_width} px, over {phone.PHONE_PIXELS}"
        )
