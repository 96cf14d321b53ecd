"""Child processes that always end: whole-tree termination (study runner, chapter 3's launcher)."""

from __future__ import annotations

import contextlib
import subprocess

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
