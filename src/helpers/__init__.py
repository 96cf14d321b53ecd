"""Helpers for the study "When do more GPUs help?".

Each module belongs to the chapter that introduces it:

- chapter 1 (single device): ``paths``, ``data``, ``models``, ``train``, ``profiling``, ``hardware``,
  ``results``, ``plotting``, ``benchmarks``;
- chapter 2 (DataParallel from its primitives): ``dataparallel``;
- the study and the book: ``study`` runs the chapters with papermill, ``provenance`` writes the chapter
  banners and the provenance page.
"""

__version__ = "0.1.0"
