"""Helpers for the study "When do more GPUs help?".

Each module belongs to the chapter that introduces it:

- chapter 1 (single device): ``paths``, ``data``, ``models``, ``train``, ``profiling``, ``hardware``,
  ``results``, ``plotting``, ``benchmarks``;
- chapter 2 (DataParallel from its primitives): ``dataparallel``;
- chapter 3 (DDP): ``launch`` (the parent side of a torchrun launch), ``worker`` (the rank side),
  ``processes``, ``ddp``, ``lightning_ddp``;
- chapter 4 (collectives): the ``collectives`` package (``model``, ``p2p``, ``tasks``, ``runs``,
  ``staleness``);
- chapter 5 (cost model): the ``costmodel`` package (``money``, ``lossfit``, ``timemodel``, ``recommend``);
- the study and the book: ``study`` runs the chapters with papermill, ``provenance`` writes the chapter
  banners and the provenance page, ``gpu_check`` checks a rented GPU machine in minutes.
"""

__version__ = "0.1.0"
