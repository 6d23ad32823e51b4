"""Workload generators: agentic sessions, Mooncake trace replay, synthetic Poisson/gamma requests."""

from __future__ import annotations

import random

from loadgen.workloads.agentic import AgenticConfig, AgenticSession, AgenticWorkload
from loadgen.workloads.mooncake import MooncakeConfig, MooncakeWorkload
from loadgen.workloads.synthetic import SyntheticConfig, SyntheticWorkload

WorkloadConfig = AgenticConfig | MooncakeConfig | SyntheticConfig


def build_workload(
    config: WorkloadConfig, rng: random.Random
) -> AgenticWorkload | MooncakeWorkload | SyntheticWorkload:
    """The generator for a parsed spec; `rng` seeds everything it draws."""
    if isinstance(config, AgenticConfig):
        return AgenticWorkload(config, rng)
    if isinstance(config, MooncakeConfig):
        return MooncakeWorkload(config)
    return SyntheticWorkload(config, rng)


__all__ = [
    "AgenticConfig", "AgenticSession", "AgenticWorkload", "MooncakeConfig", "MooncakeWorkload",
    "SyntheticConfig", "SyntheticWorkload", "WorkloadConfig", "build_workload",
]
