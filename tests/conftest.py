"""Shared fixtures: the real FSDD recordings and throwaway folders for caches and results."""

import os
import shutil
import uuid
from pathlib import Path

import psutil
import pytest

from helpers.data import DatasetError, find_recordings


@pytest.fixture(scope="session")
def recordings() -> Path:
    """The real FSDD v1.0.10 recordings (FSDD_DIR, or data/fsdd/); required on CI, skipped elsewhere."""
    try:
        return find_recordings()
    except DatasetError as error:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"FSDD recordings not available: {error}")


@pytest.fixture
def recordings_copy(recordings, tmp_path) -> Path:
    """A private copy of the recordings that a test may damage."""
    copy = tmp_path / "recordings"
    shutil.copytree(recordings, copy)
    return copy


@pytest.fixture(scope="session")
def fsdd(recordings, tmp_path_factory):
    """The decoded dataset, cached in a session-private folder."""
    from helpers.data import load_fsdd

    return load_fsdd(recordings, cache_dir=tmp_path_factory.mktemp("cache"))


WORKER_MODULES = (
    "torch.distributed.run", "helpers.ddp", "helpers.lightning_ddp", "helpers.collectives.tasks",
    "helpers.sharding.tasks",
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
