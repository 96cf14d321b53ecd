"""The checks ``conftest`` makes of every launch: ``no_leftovers`` sees a test's own live launch processes,
and only those; a test that reads a shared launch fails when that launch did not run."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import TEST_TAG, worker_processes


def test_a_live_worker_is_found_under_its_own_tag_only(no_leftovers):
    # a stand-in whose command line names a worker module, started under this test's tag
    stand_in = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "helpers.ddp"])
    try:
        assert os.environ[TEST_TAG] == no_leftovers
        assert [p.pid for p in worker_processes(no_leftovers)] == [stand_in.pid]
        assert worker_processes("a test running beside this one") == []
    finally:
        stand_in.kill()
        stand_in.wait()
    assert worker_processes(no_leftovers) == []


SESSION = """
import pytest
from conftest import NO_RECORDINGS, shared_launch


@shared_launch(scope="module")
def launched():
    pytest.skip("torchrun could not start")


@shared_launch()
def launched_without_recordings():
    pytest.skip(f"{NO_RECORDINGS}: none on this machine")


def test_reads_the_launch(launched):
    pass


def test_reads_the_launch_too(launched):
    pass


def test_reads_a_launch_that_had_no_recordings(launched_without_recordings):
    pass


def test_reads_no_launch():
    pytest.skip("skipped for a reason of its own")
"""


def test_a_test_that_reads_a_shared_launch_fails_when_the_launch_is_skipped(tmp_path):
    """Issue 39: sharing a launch must not quietly lose its assertions. A shared launch skipped for any
    reason but missing recordings fails each test that reads it; other skips stay skips."""
    shutil.copy(Path(__file__).with_name("conftest.py"), tmp_path / "conftest.py")
    (tmp_path / "test_session.py").write_text(SESSION)
    session = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rfs", str(tmp_path)],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    summary = session.stdout.strip().splitlines()[-1]
    # the skip happens while setting the test up, so pytest reports each as an error
    assert session.returncode == 1 and summary.startswith("2 skipped, 2 errors"), session.stdout
    lost = "the shared launch launched did not run (Skipped: torchrun could not start)"
    assert session.stdout.count(lost) == 2, session.stdout
