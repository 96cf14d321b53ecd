"""Helpers for the study "When do more GPUs help?".

Each module belongs to the chapter that introduces it:

- ``paths``, ``data``, ``models``, ``train``, ``memory``, ``profiling``, ``hardware``,
  ``results``, ``plotting``: chapter 1 (single device);
- ``study``: runs the chapters with papermill and feeds the book.
"""

__version__ = "0.1.0"
