"""helpers.hardware: the fingerprint names what measurements depend on."""

import torch

from helpers import hardware


def test_fingerprint_names_cpu_gpus_and_versions():
    info = hardware.fingerprint()
    assert info["usable_cores"] >= 1 and info["cpu_model"]
    assert info["torch"] == torch.__version__
    assert len(info["gpus"]) == (torch.cuda.device_count() if torch.cuda.is_available() else 0)


def test_describe_names_gpus_or_their_absence():
    cpu_only = {"usable_cores": 2, "cpu_model": "Xeon", "gpus": []}
    assert hardware.describe(cpu_only) == "2-core Xeon, no GPU"
    gpu = {"name": "NVIDIA H200", "memory_bytes": 150 * 2**30}
    two = {**cpu_only, "gpus": [gpu, gpu]}
    assert hardware.describe(two) == "2x NVIDIA H200 (150 GiB); 2-core Xeon"
