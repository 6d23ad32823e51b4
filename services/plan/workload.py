"""The workload as the screen sees it: a sample of its requests' prompt, missed and output tokens.

The sample is planned offline over whole sessions, first turns included, as
services/experiments/scaling.py plans the mean missed tokens: the workload's
own generator draws the prompts and hit targets, and a random answer of the
requested length stands in for the model's (outputs are that long: the engine
generates `max_tokens`, docs/engine.md). Every per-request figure of the screen
(docs/plan.md, "The screen") is a mean or a share over this sample.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from loadgen.plan import plan_offline
from loadgen.spec import parse_spec
from loadgen.workloads import build_workload

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
    rng = random.Random(seed)
    workload = build_workload(parse_spec(spec), random.Random(rng.getrandbits(64)))
    vocab = getattr(workload.config, "vocab", 32000)

    def answer(prompt: list[int], max_tokens: int) -> list[int]:
        return [rng.randrange(vocab) for _ in range(max_tokens)]

    plans = plan_offline(workload, answer, requests, concurrent=SAMPLE_SESSIONS)
    prompt = np.array([p.prompt_tokens for p in plans], dtype=float)
    missed = np.array([max(1.0, p.prompt_tokens * (1 - p.hit_rate)) for p in plans])
    output = np.array([p.max_tokens for p in plans], dtype=float)
    return WorkloadSample(prompt, missed, output)
