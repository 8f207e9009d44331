"""moetrain: train and run Mixture-of-Experts transformer language models on cpu, opencl or
cuda from Python, with the same C++ library as the `moetrain` command.

    import moetrain, numpy as np
    dev = moetrain.open_device("cpu")
    model = moetrain.Model.from_preset(dev, "tiny")
    model.init_weights(1337)
    trainer = moetrain.Trainer(model, lr=1e-3, total_steps=100)
    stats = trainer.step(x, y)          # int32 arrays [accum * B, T]
    print(stats.loss, stats.grad_norm)

Library errors raise moetrain.Error with the one-line message the CLI prints after
"moetrain: error: ". Steps, evaluation, generation and checkpoint IO release the GIL.
"""
from __future__ import annotations

from typing import List

from ._moetrain import (BatchLoader, Device, Error, Model, Trainer, decode_tokens, device_info,
                        encode_text, generate, generate_text, list_backends, load_tokens,
                        open_device, preset_config, preset_names, read_checkpoint_info,
                        save_checkpoint, split_tokens, split_pattern_names)
from ._types import ExpertLoad, LossStats, StepStats

__version__ = "0.1.0"

__all__ = [
    "available_devices", "BatchLoader", "Device", "Error", "ExpertLoad", "LossStats", "Model", "StepStats",
    "Trainer", "decode_tokens", "device_info", "encode_text", "evaluate", "generate",
    "generate_text", "list_backends", "load_tokens", "open_device", "preset_config",
    "preset_names", "read_checkpoint_info", "save_checkpoint", "split_tokens",
    "split_pattern_names",
]


def evaluate(model: Model, tokens, batch: int, seq: int, batches: int) -> LossStats:
    """Mean of per-batch means over the first `batches` windows of `tokens` (an int32 array),
    exactly as `moetrain train --eval-every` and `moetrain eval` compute it."""
    loader = BatchLoader(tokens, batch, seq, "val")
    mean = LossStats(loss=0.0, ce=0.0, aux=0.0, z=0.0, tokens=0)
    for _ in range(batches):
        x, y = loader.next()
        s = model.evaluate(x, y)
        mean.ce += s.ce / batches
        mean.aux += s.aux / batches
        mean.z += s.z / batches
        mean.loss += s.loss / batches
        mean.tokens += s.tokens
    return mean


def available_devices() -> List[str]:
    """Ids of every usable device ("cpu:0", "opencl:0", ...)."""
    return [d["id"] for b in list_backends() for d in b["devices"] if d["available"]]

