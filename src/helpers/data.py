"""The Free Spoken Digit Dataset (FSDD) v1.0.10 as tensors (chapter 1).

3,000 mono 8 kHz 16-bit recordings (6 speakers x 10 digits x 50 takes), read with soundfile, checked
file by file against a committed sha256 manifest, cut or zero-padded to 12,000 samples (1.5 s) and split
the official way: takes 0-4 are the test set (300 clips), takes 5-49 the training set (2,700 clips).

The recordings are found, in this order, at an explicit path, at ``$FSDD_DIR``, under ``data/fsdd/``,
else downloaded from the public repository's v1.0.10 archive. The decoded tensors are cached in one file
that is reused for as long as the manifest is unchanged.
"""

from __future__ import annotations

import hashlib
import os
import re
import tarfile
import tempfile
import urllib.request
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import soundfile
import torch
from torch.utils.data import TensorDataset
from tqdm import tqdm

from helpers.paths import data_dir

FSDD_VERSION = "v1.0.10"
ARCHIVE_URL = "https://github.com/Jakobovski/free-spoken-digit-dataset/archive/refs/tags/v1.0.10.tar.gz"
SAMPLE_RATE = 8_000
CLIP_SAMPLES = 12_000
TEST_TAKES = range(0, 5)
SPLIT_SIZES = {"train": 2_700, "test": 300}  # v1.0.10: 6 speakers x 10 digits x 50 takes, takes 0-4 test
FILE_NAME = re.compile(r"^(?P<digit>\d)_(?P<speaker>[a-z]+)_(?P<take>\d+)\.wav$")
CACHE_FORMAT = 1

HOW_TO_GET = (
    "Get the recordings with `python -m helpers.data --download` (needs internet), or point the "
    "environment variable FSDD_DIR at a folder holding the FSDD v1.0.10 .wav files "
    "(for example a clone of github.com/Jakobovski/free-spoken-digit-dataset, folder recordings/)."
)


class DatasetError(RuntimeError):
    """The recordings are missing, incomplete or not the published ones."""


def manifest_path() -> Path:
    """The committed per-file sha256 manifest of FSDD v1.0.10 (``sha256sum`` format)."""
    return data_dir() / f"fsdd-{FSDD_VERSION}.sha256"


def read_manifest(path: Path | None = None) -> dict[str, str]:
    """File name -> expected sha256, from a ``sha256sum``-format manifest."""
    path = Path(path or manifest_path())
    entries = {}
    for line in path.read_text().splitlines():
        digest, name = line.split(maxsplit=1)
        entries[name.strip().lstrip("*")] = digest
    return entries


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _holds_recordings(folder: Path) -> Path | None:
    """The folder of .wav files at ``folder`` or its ``recordings/`` child, if either exists."""
    for candidate in (folder, folder / "recordings"):
        if candidate.is_dir() and any(candidate.glob("*.wav")):
            return candidate
    return None


def find_recordings(path: str | os.PathLike | None = None) -> Path:
    """The folder of FSDD .wav files: ``path``, else ``$FSDD_DIR``, else ``data/fsdd/``.

    A path the user names (argument or variable) must hold the recordings: it is never silently
    replaced by another source. Raises DatasetError saying where it looked and how to get the data.
    """
    named = [("path argument", path), ("FSDD_DIR", os.environ.get("FSDD_DIR"))]
    for label, value in named:
        if value:
            if found := _holds_recordings(Path(value)):
                return found
            raise DatasetError(
                f"No FSDD recordings in {value} (given as {label}): "
                f"expected .wav files there or in its recordings/ folder. {HOW_TO_GET}"
            )
    default = default_recordings_dir()
    if found := _holds_recordings(default):
        return found
    raise DatasetError(
        f"No FSDD recordings found: no path given, FSDD_DIR unset, nothing in {default}. {HOW_TO_GET}"
    )


def resolve_recordings(path: str | os.PathLike | None = None, *, download: bool = True) -> Path:
    """Like :func:`find_recordings`, but downloads into ``data/fsdd/`` when nothing is found."""
    try:
        return find_recordings(path)
    except DatasetError:
        if path or os.environ.get("FSDD_DIR") or not download:
            raise
    return download_fsdd()


def default_recordings_dir() -> Path:
    """``data/fsdd/``: where downloads go and where recordings are looked for last."""
    return data_dir() / "fsdd"


def download_fsdd(destination: Path | None = None, url: str = ARCHIVE_URL) -> Path:
    """Download the v1.0.10 archive, verify every recording, and install ``destination/recordings``.

    Files are unpacked into a temporary folder beside the destination and moved into place only after
    all of them match the manifest, so a failed or interrupted download leaves nothing half-made.
    """
    destination = Path(destination or default_recordings_dir())
    destination.mkdir(parents=True, exist_ok=True)
    target = destination / "recordings"
    if target.exists():
        raise DatasetError(f"{target} exists already; remove it to download again.")
    with tempfile.TemporaryDirectory(dir=destination, prefix=".download-") as scratch:
        archive = Path(scratch) / "fsdd.tar.gz"
        try:
            with urllib.request.urlopen(url, timeout=60) as response, archive.open("wb") as out:
                total = int(response.headers.get("Content-Length") or 0) or None
                with tqdm(total=total, unit="B", unit_scale=True, desc="FSDD download") as bar:
                    while chunk := response.read(1 << 20):
                        out.write(chunk)
                        bar.update(len(chunk))
        except OSError as error:
            raise DatasetError(f"Could not download {url}: {error}. {HOW_TO_GET}") from error
        unpacked = Path(scratch) / "recordings"
        unpacked.mkdir()
        with tarfile.open(archive) as tar:
            for member in tar.getmembers():
                name = Path(member.name).name
                in_recordings = Path(member.name).parent.name == "recordings"
                if member.isfile() and in_recordings and FILE_NAME.match(name):
                    (unpacked / name).write_bytes(tar.extractfile(member).read())
        verify_recordings(unpacked)
        unpacked.rename(target)
    return target


def read_recording(path: Path) -> np.ndarray:
    """The int16 samples of one recording; DatasetError naming the file if it is not 8 kHz mono PCM16."""
    path = Path(path)
    try:
        info = soundfile.info(str(path))
        samples, rate = soundfile.read(str(path), dtype="int16", always_2d=True)
    except Exception as error:  # libsndfile raises several types for unreadable content
        raise DatasetError(f"{path.name}: unreadable audio ({error})") from error
    problems = []
    if rate != SAMPLE_RATE:
        problems.append(f"sample rate {rate} Hz, expected {SAMPLE_RATE} Hz")
    if samples.shape[1] != 1:
        problems.append(f"{samples.shape[1]} channels, expected 1 (mono)")
    if info.subtype != "PCM_16":
        problems.append(f"sample format {info.subtype}, expected PCM_16")
    if problems:
        raise DatasetError(f"{path.name}: " + "; ".join(problems))
    return samples[:, 0]


def _describe_mismatch(path: Path) -> str:
    """Why a file's checksum differs, where its content says so."""
    try:
        read_recording(path)
    except DatasetError as error:
        return str(error).split(": ", 1)[1]
    return "content differs from the published file"


def verify_recordings(folder: Path, manifest: dict[str, str] | None = None) -> list[Path]:
    """Every manifest file present, no other .wav, every checksum matching: else DatasetError naming files."""
    folder = Path(folder)
    manifest = manifest or read_manifest()
    present = {p.name for p in folder.glob("*.wav")}
    problems = []
    if missing := sorted(set(manifest) - present):
        problems.append(f"{len(missing)} missing: {', '.join(missing[:10])}")
    if unexpected := sorted(present - set(manifest)):
        problems.append(f"{len(unexpected)} not in FSDD {FSDD_VERSION}: {', '.join(unexpected[:10])}")
    changed = [name for name in sorted(present & set(manifest)) if sha256_of(folder / name) != manifest[name]]
    if changed:
        details = ", ".join(f"{name} ({_describe_mismatch(folder / name)})" for name in changed[:10])
        problems.append(f"{len(changed)} with a wrong sha256: {details}")
    if problems:
        raise DatasetError(f"Recordings in {folder} are not FSDD {FSDD_VERSION}: " + "; ".join(problems))
    return [folder / name for name in sorted(manifest)]


def fit_length(samples: np.ndarray, length: int = CLIP_SAMPLES) -> np.ndarray:
    """Crop to the first ``length`` samples, or zero-pad at the end up to ``length``."""
    if len(samples) >= length:
        return samples[:length]
    return np.pad(samples, (0, length - len(samples)))


@dataclass(frozen=True)
class FSDD:
    """All 3,000 clips in manifest order, with their digit, speaker, take and original length."""

    waveforms: torch.Tensor  # [N, 1, CLIP_SAMPLES] float32 in [-1, 1)
    digits: torch.Tensor  # [N] int64
    speakers: torch.Tensor  # [N] int64 index into speaker_names
    speaker_names: list[str]
    takes: torch.Tensor  # [N] int64
    lengths: torch.Tensor  # [N] int64, samples before cropping/padding
    files: list[str]

    @property
    def is_test(self) -> torch.Tensor:
        """Official split: takes 0-4 are the test set."""
        return (self.takes >= TEST_TAKES.start) & (self.takes < TEST_TAKES.stop)

    def split(self, name: str) -> TensorDataset:
        """(waveform, digit) pairs of the ``"train"`` or ``"test"`` split."""
        if name not in ("train", "test"):
            raise ValueError(f"split must be 'train' or 'test', not {name!r}")
        mask = self.is_test if name == "test" else ~self.is_test
        return TensorDataset(self.waveforms[mask], self.digits[mask])

    def to_frame(self) -> pd.DataFrame:
        """One row per clip: file, digit, speaker, take, split, original samples and seconds."""
        return pd.DataFrame(
            {
                "file": self.files,
                "digit": self.digits.numpy(),
                "speaker": [self.speaker_names[i] for i in self.speakers.tolist()],
                "take": self.takes.numpy(),
                "split": np.where(self.is_test.numpy(), "test", "train"),
                "samples": self.lengths.numpy(),
                "seconds": self.lengths.numpy() / SAMPLE_RATE,
            }
        )


def length_summary(clips: pd.DataFrame) -> dict:
    """Shortest, median and longest recording in samples, how many exceed the cut, and the mean padding."""
    samples = clips["samples"]
    return {
        "shortest": int(samples.min()),
        "median": int(samples.median()),
        "longest": int(samples.max()),
        f"longer than {CLIP_SAMPLES:,} samples (cropped)": int((samples > CLIP_SAMPLES).sum()),
        "mean padding per clip (samples of silence)": round(
            float((CLIP_SAMPLES - samples).clip(lower=0).mean())
        ),
    }


def length_table(clips: pd.DataFrame) -> pd.DataFrame:
    """``length_summary`` as a table to read: one row per figure, samples with thousands separators."""
    return pd.Series({what: f"{count:,}" for what, count in length_summary(clips).items()}).to_frame(
        "samples"
    )


def epoch_bytes_table(epochs: dict[str, int], readable: bool = False) -> pd.DataFrame:
    """Bytes of one epoch of float32 clips, for each ``{label: clips}``, in bytes, MB (10⁶) and MiB (2²⁰).

    ``readable``: the same as a table to read, units in the headers and thousands separators.
    """
    clip_bytes = CLIP_SAMPLES * 4
    table = pd.DataFrame(
        [
            {"epoch": label, "clips": clips, "bytes per clip": clip_bytes, "bytes": clips * clip_bytes,
             "MB": round(clips * clip_bytes / 1e6, 1), "MiB": round(clips * clip_bytes / 2**20, 2)}
            for label, clips in epochs.items()
        ]
    ).set_index("epoch")  # fmt: skip
    if not readable:
        return table
    return pd.DataFrame(
        {
            "clips": table["clips"].map("{:,}".format),
            "bytes per clip": table["bytes per clip"].map("{:,}".format),
            "bytes": table["bytes"].map("{:,}".format),
            "MB (10⁶ bytes)": table["MB"].map("{:,.1f}".format),
            "MiB (2²⁰ bytes)": table["MiB"].map("{:,.2f}".format),
        }
    )


def take(dataset: TensorDataset, samples: int | None, seed: int = 0) -> TensorDataset:
    """A seeded random subset of ``samples`` items (all of them when None), for quick smoke runs.

    Random rather than the first rows, because the manifest order is sorted by digit.
    """
    if samples is None:
        return dataset
    if not isinstance(samples, int) or not 0 < samples <= len(dataset):
        raise ValueError(f"samples must be between 1 and {len(dataset)}, not {samples!r}")
    chosen = torch.randperm(len(dataset), generator=torch.Generator().manual_seed(seed))[:samples]
    return TensorDataset(*(t[chosen.sort().values] for t in dataset.tensors))


def cache_path(cache_dir: Path | None = None) -> Path:
    """One cache file per manifest content and clip length, so a new manifest never reads a stale cache."""
    manifest_digest = sha256_of(manifest_path())[:16]
    name = f"fsdd-{FSDD_VERSION}-{CLIP_SAMPLES}-f{CACHE_FORMAT}-{manifest_digest}.pt"
    return Path(cache_dir or data_dir() / "cache") / name


def decode_recordings(folder: Path) -> dict:
    """Verify and decode every recording into int16 arrays plus metadata (the cache's content)."""
    files = verify_recordings(folder)
    waveforms = np.zeros((len(files), 1, CLIP_SAMPLES), dtype=np.int16)
    digits, speakers, takes, lengths = [], [], [], []
    for row, path in enumerate(tqdm(files, desc="Decoding FSDD", unit="file", mininterval=1)):
        samples = read_recording(path)
        waveforms[row, 0] = fit_length(samples)
        match = FILE_NAME.match(path.name)
        digits.append(int(match["digit"]))
        speakers.append(match["speaker"])
        takes.append(int(match["take"]))
        lengths.append(len(samples))
    return {
        "waveforms_int16": torch.from_numpy(waveforms),
        "digits": torch.tensor(digits),
        "speakers": speakers,
        "takes": torch.tensor(takes),
        "lengths": torch.tensor(lengths),
        "files": [p.name for p in files],
    }


def load_fsdd(
    path: str | os.PathLike | None = None, *, cache_dir: Path | None = None, download: bool = True
) -> FSDD:
    """The whole dataset, from the cache when it matches the manifest, else decoded and cached.

    A cache file that cannot be read is moved aside (``<name>.unreadable``) with a warning naming it,
    and the recordings are decoded again.
    """
    cache = cache_path(cache_dir)
    content = None
    if cache.exists():
        try:
            content = torch.load(cache, weights_only=True)
        except Exception as error:  # truncated or foreign file: any failure to load it
            aside = cache.with_name(cache.name + ".unreadable")
            os.replace(cache, aside)
            warnings.warn(
                f"unreadable cache {cache} ({error}) moved to {aside}; decoding again", stacklevel=2
            )
    if content is None:
        content = decode_recordings(resolve_recordings(path, download=download))
        cache.parent.mkdir(parents=True, exist_ok=True)
        partial = cache.with_suffix(f".{os.getpid()}.tmp")
        torch.save(content, partial)
        os.replace(partial, cache)
    speaker_names = sorted(set(content["speakers"]))
    return FSDD(
        waveforms=content["waveforms_int16"].to(torch.float32) / 32768.0,
        digits=content["digits"],
        speakers=torch.tensor([speaker_names.index(s) for s in content["speakers"]]),
        speaker_names=speaker_names,
        takes=content["takes"],
        lengths=content["lengths"],
        files=content["files"],
    )


def main() -> None:
    """``python -m helpers.data [--download] [PATH]``: fetch or check the recordings and build the cache."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("path", nargs="?", help="folder holding the FSDD .wav files")
    parser.add_argument("--download", action="store_true", help="download into data/fsdd/ if absent")
    args = parser.parse_args()
    folder = resolve_recordings(args.path, download=args.download)
    dataset = load_fsdd(folder)
    print(f"FSDD {FSDD_VERSION}: {len(dataset.files)} verified recordings from {folder}")
    print(f"cache: {cache_path()}")


if __name__ == "__main__":
    main()
