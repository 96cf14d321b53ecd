"""Child processes that always end: whole-tree termination (study runner, chapter 3's launcher), and a
launch's own processes ending at once when their work is done."""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import subprocess
import sys
from typing import NoReturn

import psutil


def stop_process_tree(process: subprocess.Popen, grace_seconds: float = 10) -> None:
    """Terminate a child and every descendant, then kill what is left after ``grace_seconds``.

    Descendants are collected first because some (papermill's kernel, torchrun's workers) run in
    sessions of their own and would survive a signal to the child's process group. A child that was
    already waited for is left alone: its PID may since have been given to an unrelated process.
    """
    if process.returncode is not None:
        return
    try:
        family = [psutil.Process(process.pid), *psutil.Process(process.pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        family = []
    for member in family:
        with contextlib.suppress(psutil.NoSuchProcess):
            member.terminate()
    _, alive = psutil.wait_procs(family, timeout=grace_seconds)
    for member in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            member.kill()
    process.wait()


def end_process() -> NoReturn:
    """Exit at once with status 0: for a launch's processes (torchrun's agent, every rank) once their
    results are written and their process group left.

    Python's orderly teardown of the modules torch loads takes about half a second on a 2-core machine,
    paid by every rank and by the agent of every launch, one after the other. Python's standard streams,
    its log handlers and the C library's stdio buffers (C++ code's output) are flushed first; then the
    process ends without tearing its modules down or running exit handlers (``os._exit``).
    """
    sys.stdout.flush()
    sys.stderr.flush()
    logging.shutdown()
    ctypes.CDLL(None).fflush(None)  # every C stdio stream
    os._exit(0)
