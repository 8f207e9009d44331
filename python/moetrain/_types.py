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
    """How many (token, slot) selections each expert of one MoE layer received (before any
    capacity dropping), how many of them a capacity dropped, and the layer's expert bias range
    (docs/MODEL.md 2; 0 without a capacity or an expert bias). In data-parallel training all
    of them are over every rank's rows."""

    layer: int
    counts: List[int]
    dropped: int = 0
    bias_min: float = 0.0
    bias_max: float = 0.0

    @property
    def dropped_share(self) -> float:
        """The share of the selections dropped (`moetrain train --log-json`'s "dropped")."""
        return self.dropped / self.total if self.total else 0.0

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
