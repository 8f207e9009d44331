"""Plain records the extension returns: loss terms, one optimizer step's stats, expert load."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import List


@dataclass
class LossStats:
    """Loss terms of one forward pass (means over the batch, docs/MODEL.md 3)."""

    loss: float
    ce: float
    aux: float
    z: float
    tokens: int  # targets that counted (y != -1)


@dataclass
class ExpertLoad:
    """How many (token, slot) rows each expert of one MoE layer received."""

    layer: int
    counts: List[int]

    @property
    def total(self) -> int:
        return sum(self.counts)

    @property
    def min_share(self) -> float:
        return min(self.counts) / self.total if self.total else 0.0

    @property
    def max_share(self) -> float:
        return max(self.counts) / self.total if self.total else 0.0

    @property
    def empty(self) -> int:
        """Experts that got no rows."""
        return sum(1 for c in self.counts if c == 0)


@dataclass
class StepStats:
    """One optimizer step (the fields `moetrain train --log-json` writes per step)."""

    step: int  # optimizer steps completed after this one (from 1)
    loss: float
    ce: float
    aux: float
    z: float
    tokens: int
    lr: float
    grad_norm: float  # global norm before clipping
    loss_scale: float  # 1 unless fp16
    skipped: bool  # fp16 overflow: no update, the step is retried
    expert_load: List[ExpertLoad] = field(default_factory=list)
