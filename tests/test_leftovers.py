"""The ``no_leftovers`` check itself: it sees a test's own live launch processes, and only those."""

import os
import subprocess
import sys

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
