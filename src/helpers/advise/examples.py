"""Two models the time model never saw (chapter 7): each reads FSDD's raw 8 kHz waveforms, shape (1, 12000),
like the book's two, so they train on the same data, and neither looks like them.

- ``MelCNN``: a log-mel spectrogram computed inside the model (``torchaudio.transforms.MelSpectrogram``,
  40 mel bands, 25 ms windows every 20 ms) and a small 2-D CNN over it: a few hundred thousand FLOPs per
  parameter, almost all of them in convolutions.
- ``WaveTransformer``: the waveform cut into 60 frames of 200 samples (25 ms), each embedded linearly, with
  a learned position, through two Transformer encoder layers; the mean over time classifies. Its matrix
  products are small and many: host ops matter.

``python -m helpers.advise helpers.advise.examples:mel_cnn --input-shape 1,12000 --batch 64`` advises on one.
"""

from __future__ import annotations

import torch
import torchaudio
from torch import nn

from helpers.data import CLIP_SAMPLES, SAMPLE_RATE

FRAME = 200  # samples per Transformer token: 25 ms at 8 kHz


class MelCNN(nn.Module):
    """Log-mel spectrogram (40 × 76) → three 3×3 convolution blocks → global average → 10 classes."""

    def __init__(self, mels: int = 40, channels=(16, 32, 64)) -> None:
        super().__init__()
        self.spectrogram = torchaudio.transforms.MelSpectrogram(
            sample_rate=SAMPLE_RATE, n_fft=400, win_length=200, hop_length=160, n_mels=mels
        )
        blocks, before = [], 1
        for width in channels:
            blocks += [
                nn.Conv2d(before, width, 3, padding=1),
                nn.BatchNorm2d(width),
                nn.ReLU(),
                nn.MaxPool2d(2),
            ]
            before = width
        self.features = nn.Sequential(*blocks)
        self.classify = nn.Linear(before, 10)

    def forward(self, waveform: torch.Tensor) -> torch.Tensor:
        mel = torch.log(self.spectrogram(waveform) + 1e-6)  # (N, 1, mels, frames)
        return self.classify(self.features(mel).mean(dim=(2, 3)))


class WaveTransformer(nn.Module):
    """Frames of 200 samples → linear embedding + learned position → 2 encoder layers → mean → 10 classes."""

    def __init__(self, width: int = 64, heads: int = 4, layers: int = 2) -> None:
        super().__init__()
        self.embed = nn.Linear(FRAME, width)
        self.position = nn.Parameter(torch.zeros(CLIP_SAMPLES // FRAME, width))
        layer = nn.TransformerEncoderLayer(width, heads, 2 * width, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.classify = nn.Linear(width, 10)

    def forward(self, waveform: torch.Tensor) -> torch.Tensor:
        frames = waveform.reshape(waveform.shape[0], -1, FRAME)  # (N, 60, 200)
        return self.classify(self.encoder(self.embed(frames) + self.position).mean(dim=1))


def mel_cnn() -> nn.Module:
    """A fresh ``MelCNN``, seeded (the factory ``python -m helpers.advise`` imports)."""
    torch.manual_seed(0)
    return MelCNN()


def wave_transformer() -> nn.Module:
    """A fresh ``WaveTransformer``, seeded."""
    torch.manual_seed(0)
    return WaveTransformer()


EXAMPLES = {
    "MelCNN": "helpers.advise.examples:mel_cnn",
    "WaveTransformer": "helpers.advise.examples:wave_transformer",
}
