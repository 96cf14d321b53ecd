"""helpers.data on the real recordings, and every way bad input is refused."""

import io
import tarfile

import numpy as np
import pytest
import soundfile
import torch
from conftest import own

from helpers import data
from helpers.data import CLIP_SAMPLES, DatasetError


def test_manifest_lists_every_recording_once():
    manifest = data.read_manifest()
    assert len(manifest) == 3000
    assert all(data.FILE_NAME.match(name) for name in manifest)
    assert all(len(digest) == 64 for digest in manifest.values())


def test_dataset_shapes_split_and_labels(fsdd):
    assert fsdd.waveforms.shape == (3000, 1, CLIP_SAMPLES)
    assert fsdd.waveforms.dtype == torch.float32
    assert int(fsdd.is_test.sum()) == 300
    assert len(fsdd.split("train")) == 2700 and len(fsdd.split("test")) == 300
    assert {name: len(fsdd.split(name)) for name in data.SPLIT_SIZES} == data.SPLIT_SIZES
    assert fsdd.speaker_names == ["george", "jackson", "lucas", "nicolas", "theo", "yweweler"]
    clips = fsdd.to_frame()
    per_digit = clips.groupby(["split", "digit"]).size().unstack()
    assert (per_digit.loc["test"] == 30).all() and (per_digit.loc["train"] == 270).all()
    per_speaker = clips.groupby(["split", "speaker"]).size().unstack()
    assert (per_speaker.loc["test"] == 50).all() and (per_speaker.loc["train"] == 450).all()
    assert set(clips.loc[clips["split"] == "test", "take"]) == {0, 1, 2, 3, 4}
    assert (int(clips["samples"].min()), int(clips["samples"].max())) == (1148, 18262)
    assert int((clips["samples"] > CLIP_SAMPLES).sum()) == 2


def test_waveform_values_are_the_files_samples(fsdd, recordings):
    row = fsdd.files.index("7_theo_3.wav")
    samples, rate = soundfile.read(recordings / "7_theo_3.wav", dtype="float32")
    assert rate == 8000
    length = min(len(samples), CLIP_SAMPLES)
    assert torch.equal(fsdd.waveforms[row, 0, :length], torch.from_numpy(samples[:length]))
    assert torch.all(fsdd.waveforms[row, 0, length:] == 0)
    assert int(fsdd.digits[row]) == 7 and fsdd.speaker_names[int(fsdd.speakers[row])] == "theo"


def test_cache_is_reused_without_the_recordings(recordings, tmp_path, monkeypatch):
    first = data.load_fsdd(recordings, cache_dir=tmp_path)
    assert data.cache_path(tmp_path).exists()
    monkeypatch.setenv("FSDD_DIR", str(tmp_path / "nowhere"))
    again = data.load_fsdd(cache_dir=tmp_path, download=False)
    assert torch.equal(first.waveforms, again.waveforms) and first.files == again.files
    assert not list(tmp_path.glob("*.tmp"))


def test_fit_length_pads_and_crops():
    assert np.array_equal(data.fit_length(np.array([1, 2], dtype=np.int16), 4), [1, 2, 0, 0])
    assert np.array_equal(data.fit_length(np.arange(6, dtype=np.int16), 4), [0, 1, 2, 3])


def test_take_is_a_seeded_subset(fsdd):
    train = fsdd.split("train")
    first, second = data.take(train, 100, seed=1), data.take(train, 100, seed=1)
    assert torch.equal(first.tensors[0], second.tensors[0]) and len(first) == 100
    assert len(set(first.tensors[1].tolist())) > 1  # not the digit-sorted head of the manifest
    with pytest.raises(ValueError, match="between 1 and 2700"):
        data.take(train, 0)


def test_unknown_split_is_refused(fsdd):
    with pytest.raises(ValueError, match="'train' or 'test'"):
        fsdd.split("validation")


def test_named_folder_without_recordings_says_where_and_how(tmp_path, monkeypatch):
    monkeypatch.setenv("FSDD_DIR", str(tmp_path / "missing"))
    with pytest.raises(DatasetError, match="missing.*FSDD_DIR.*--download"):
        data.find_recordings()


def test_nothing_found_and_no_download_says_where_it_looked(tmp_path, monkeypatch):
    monkeypatch.delenv("FSDD_DIR", raising=False)
    monkeypatch.setattr(data, "default_recordings_dir", lambda: tmp_path / "fsdd")
    with pytest.raises(DatasetError, match="FSDD_DIR unset, nothing in .*fsdd.*--download"):
        data.resolve_recordings(download=False)


def test_folder_with_recordings_child_is_accepted(recordings_copy):
    assert data.find_recordings(recordings_copy.parent) == recordings_copy


def test_missing_file_is_named(recordings_copy):
    (recordings_copy / "4_lucas_30.wav").unlink()
    with pytest.raises(DatasetError, match="1 missing: 4_lucas_30.wav"):
        data.verify_recordings(recordings_copy)


def test_unexpected_file_is_named(recordings_copy):
    (recordings_copy / "0_george_0.wav").rename(recordings_copy / "0_george_50.wav")
    with pytest.raises(DatasetError, match="not in FSDD v1.0.10: 0_george_50.wav"):
        data.verify_recordings(recordings_copy)


def test_altered_content_is_named(recordings_copy):
    path = own(recordings_copy / "9_yweweler_12.wav")
    content = bytearray(path.read_bytes())
    content[-1] ^= 0xFF
    path.write_bytes(bytes(content))
    with pytest.raises(DatasetError, match=r"9_yweweler_12.wav \(content differs"):
        data.verify_recordings(recordings_copy)


@pytest.mark.parametrize(
    ("rate", "channels", "message"),
    [(16000, 1, "sample rate 16000 Hz, expected 8000 Hz"), (8000, 2, "2 channels, expected 1")],
)
def test_wrong_format_is_named(recordings_copy, rate, channels, message):
    path = own(recordings_copy / "3_nicolas_7.wav")
    samples, _ = soundfile.read(path, dtype="int16")
    soundfile.write(path, np.stack([samples] * channels, axis=1), rate, subtype="PCM_16")
    with pytest.raises(DatasetError, match=f"3_nicolas_7.wav.*{message}"):
        data.verify_recordings(recordings_copy)
    with pytest.raises(DatasetError, match=message):
        data.read_recording(path)


def test_unreadable_file_is_named(recordings_copy):
    own(recordings_copy / "5_jackson_44.wav").write_bytes(b"not a wave file at all")
    with pytest.raises(DatasetError, match=r"5_jackson_44.wav \(unreadable audio"):
        data.verify_recordings(recordings_copy)


def test_load_refuses_a_damaged_folder_and_writes_no_cache(recordings_copy, tmp_path):
    own(recordings_copy / "1_theo_1.wav").write_bytes(b"")
    with pytest.raises(DatasetError, match="1_theo_1.wav"):
        data.load_fsdd(recordings_copy, cache_dir=tmp_path / "cache")
    assert not (tmp_path / "cache").exists()


def make_archive(recordings, path, damage: str | None = None):
    """A tar.gz laid out like GitHub's v1.0.10 archive, optionally with one damaged recording (gzip's
    fastest level: the layout and the bytes are what the download checks)."""
    with tarfile.open(path, "w:gz", compresslevel=1) as tar:
        for wav in sorted(recordings.glob("*.wav")):
            content = wav.read_bytes()
            if wav.name == damage:
                content = content[:-2] + b"\x00\x01"
            member = tarfile.TarInfo(f"free-spoken-digit-dataset-1.0.10/recordings/{wav.name}")
            member.size = len(content)
            tar.addfile(member, io.BytesIO(content))
        readme = tarfile.TarInfo("free-spoken-digit-dataset-1.0.10/README.md")
        readme.size = 5
        tar.addfile(readme, io.BytesIO(b"hello"))


@pytest.fixture(scope="session")
def good_archive(recordings, tmp_path_factory):
    """The undamaged archive, built once: downloads only read it."""
    path = tmp_path_factory.mktemp("archive") / "fsdd.tar.gz"
    make_archive(recordings, path)
    return path


def test_download_installs_verified_recordings(good_archive, tmp_path):
    target = data.download_fsdd(tmp_path / "fsdd", url=good_archive.as_uri())
    assert target == tmp_path / "fsdd" / "recordings"
    assert len(data.verify_recordings(target)) == 3000
    assert [p.name for p in (tmp_path / "fsdd").iterdir()] == ["recordings"]


def test_damaged_download_leaves_nothing_behind(recordings, tmp_path):
    make_archive(recordings, tmp_path / "fsdd.tar.gz", damage="2_george_9.wav")
    with pytest.raises(DatasetError, match="2_george_9.wav"):
        data.download_fsdd(tmp_path / "fsdd", url=(tmp_path / "fsdd.tar.gz").as_uri())
    assert list((tmp_path / "fsdd").iterdir()) == []


def test_unreachable_download_says_how_to_get_the_data(tmp_path):
    with pytest.raises(DatasetError, match="Could not download.*FSDD_DIR"):
        data.download_fsdd(tmp_path / "fsdd", url=(tmp_path / "absent.tar.gz").as_uri())


def test_lengths_and_epoch_bytes(fsdd):
    lengths = data.length_summary(fsdd.to_frame())
    assert lengths["longer than 12,000 samples (cropped)"] == 2 and lengths["shortest"] < lengths["median"]
    table = data.epoch_bytes_table({"seed": 2000})
    assert table.loc["seed", "bytes"] == 96_000_000 and table.loc["seed", "MiB"] == 91.55
    readable = data.epoch_bytes_table({"seed": 2000}, readable=True).loc["seed"]
    assert readable.tolist() == ["2,000", "48,000", "96,000,000", "96.0", "91.55"]  # 96e6 / 2**20 = 91.55
    assert data.length_table(fsdd.to_frame()).loc["longer than 12,000 samples (cropped)", "samples"] == "2"
