"""Where the project keeps its data, results and book (chapter 1).

The package is installed editable from the checkout (``pip install -e .``), so every path is anchored to
the repository root; ``STUDY_ROOT`` overrides it for a checkout elsewhere.
"""

import os
from pathlib import Path


def project_root() -> Path:
    """The repository root: ``$STUDY_ROOT`` if set, else two levels above this package."""
    if override := os.environ.get("STUDY_ROOT"):
        return Path(override).resolve()
    return Path(__file__).resolve().parents[2]


def data_dir() -> Path:
    """``data/``: FSDD download and cache target, checksum manifest, study results."""
    return project_root() / "data"


def results_dir() -> Path:
    """``data/results/``: one folder per study run."""
    return data_dir() / "results"
