"""helpers.processes: a whole process tree is stopped, and a child already waited for is left alone."""

import os
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


def test_a_process_ended_at_once_keeps_what_it_printed_and_logged_and_exits_with_zero(tmp_path):
    """``end_process`` skips Python's teardown: what sits in the buffers of a piped stdout, of stderr, of
    a log handler that writes only when flushed, and of C's stdio must still come out (the child runs
    buffered, as the torchrun agent does when started without ``-u``), and no exit handler runs."""
    log = tmp_path / "run.log"
    script = (
        "import atexit, ctypes, logging, logging.handlers, os, sys\n"
        f"held = logging.handlers.MemoryHandler(100, target=logging.FileHandler({str(log)!r}))\n"
        "logging.getLogger().addHandler(held)\n"
        "logging.getLogger().setLevel(logging.INFO)\n"
        "logging.info('logged')\n"
        "ctypes.CDLL(None).printf(b'from C')\n"
        "atexit.register(print, 'exit handler')\n"
        "print('printed;', end='')\n"
        "sys.stderr.write('warned')\n"
        "from helpers.processes import end_process\n"
        "end_process()\n"
        "print('never')\n"
    )
    buffered = {name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=buffered
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "printed;from C", "warned")
    assert log.read_text() == "logged\n"
