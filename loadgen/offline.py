"""A workload's requests planned without a server, from its spec: what the planners of this product read.

A random answer of the requested length stands in for the model's (outputs are that
long: the engine generates `max_tokens`), and `sessions` sessions are interleaved, so
the sample holds first turns and later ones as a running population does.
"""

from __future__ import annotations

import random

from loadgen.plan import RequestPlan, plan_offline
from loadgen.spec import parse_spec
from loadgen.workloads import build_workload


def plan_spec_offline(spec: str, seed: int, requests: int, sessions: int) -> list[RequestPlan]:
    rng = random.Random(seed)
    workload = build_workload(parse_spec(spec), random.Random(rng.getrandbits(64)))
    vocab = getattr(workload.config, "vocab", 32000)

    def answer(prompt: list[int], max_tokens: int) -> list[int]:
        return [rng.randrange(vocab) for _ in range(max_tokens)]

    return plan_offline(workload, answer, requests, concurrent=sessions)
