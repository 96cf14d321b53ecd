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

import os

# nvidia-smi and its ``topo -m`` matrix number GPUs in PCI bus order; CUDA (torch's cuda:i, and the integers
# of CUDA_VISIBLE_DEVICES) numbers them fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID (FASTEST_FIRST is
# the default: CUDA Programming Guide, "CUDA Environment Variables", read 2026-11-24,
# https://docs.nvidia.com/cuda/cuda-programming-guide/05-appendices/environment-variables.html).
# Set here, before anything initialises CUDA (importing torch does not; CUDA reads the variable once, when it
# initialises), so that torch's cuda:i and nvidia-smi's GPU i are one GPU in this process and in every worker
# it starts: children inherit the environment, and every worker imports helpers. A different value the user
# set is overridden, not kept: under FASTEST_FIRST, on a machine with GPUs of two kinds, the study would
# attribute links, compute modes and memory to the wrong GPUs without a word; with identical GPUs nothing is
# lost by overriding it.
os.environ["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"

__version__ = "0.1.0"
