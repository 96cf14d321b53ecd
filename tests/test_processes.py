"""helpers.processes: a whole process tree is stopped, and a child already waited for is left alone."""

import subprocess
import sys
import time

import psutil
import pytest

from helpers import processes


def test_a_tree_is_stopped_with_its_grandchildren():
    sleeper = "import time; time.sleep(60)"
    script = f"import subprocess, sys, time\nsubprocess.Popen([sys.executable, '-c', {sleeper!r}])\n{sleeper}"
    parent = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    deadline = time.monotonic() + 60  # wait for the grandchild to exist, however busy the machine is
    while not psutil.Process(parent.pid).children(recursive=True) and time.monotonic() < deadline:
        time.sleep(0.05)
    family = [psutil.Process(parent.pid), *psutil.Process(parent.pid).children(recursive=True)]
    assert len(family) == 2
    processes.stop_process_tree(parent, grace_seconds=5)
    assert parent.returncode is not None
    assert not any(member.is_running() and member.status() != psutil.STATUS_ZOMBIE for member in family)


def test_a_reaped_child_is_not_signalled_again(monkeypatch):
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()

    def must_not_look_up(pid):
        pytest.fail(f"looked up PID {pid}, which may belong to another process by now")

    monkeypatch.setattr(processes.psutil, "Process", must_not_look_up)
    processes.stop_process_tree(child)
