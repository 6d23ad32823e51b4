"""The workload as the screen sees it: a sample of its requests' prompt, missed and output tokens.

The sample is planned offline over whole sessions, first turns included
(loadgen/offline.py), as services/experiments/scaling.py plans the mean missed
tokens: the workload's own generator draws the prompts and hit targets. Every per-request figure of the screen
(docs/plan.md, "The screen") is a mean or a share over this sample.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from loadgen.offline import plan_spec_offline

SAMPLE_REQUESTS = 1500  # a 95% interval on a share of 10% is +-1.5 points at this size
SAMPLE_SESSIONS = 48  # sessions interleaved while planning, so the sample is not one session's turns in order


@dataclass(frozen=True)
class WorkloadSample:
    prompt: np.ndarray  # tokens of each request's prompt
    missed: np.ndarray  # of them, the ones no prefix cache holds: prefill computes them, the line carries their KV
    output: np.ndarray  # tokens each request generates

    @property
    def mean_prompt(self) -> float:
        return float(self.prompt.mean())

    @property
    def mean_missed(self) -> float:
        return float(self.missed.mean())

    @property
    def mean_output(self) -> float:
        return float(self.output.mean())

    @property
    def mean_hit(self) -> float:
        return 1.0 - float(self.missed.sum() / self.prompt.sum())


@lru_cache(maxsize=16)
def sample_workload(spec: str, seed: int = 0, requests: int = SAMPLE_REQUESTS) -> WorkloadSample:
    """`requests` requests of the workload `spec`, planned offline from `seed`."""
    plans = plan_spec_offline(spec, seed, requests, SAMPLE_SESSIONS)
    prompt = np.array([p.prompt_tokens for p in plans], dtype=float)
    missed = np.array([max(1.0, p.prompt_tokens * (1 - p.hit_rate)) for p in plans])
    output = np.array([p.max_tokens for p in plans], dtype=float)
    return WorkloadSample(prompt, missed, output)
