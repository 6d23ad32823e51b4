"""The simulated client tallies a token without its SSE chunk: the same records as reading the bytes."""

from __future__ import annotations

import dataclasses
import functools

import pytest

import services.simulate.run as run_module
from services.router.sse import ChunkEncoder
from services.scenario.loader import load_scenario
from services.simulate.client import complete
from services.simulate.run import run_simulation


def _run(preset: str):
    run = run_simulation(load_scenario(preset), "poisson:input=3000,output=48", rate=3.0, duration_s=4.0, seed=5)
    return [dataclasses.asdict(r) for r in run.records], run.outputs


@pytest.mark.parametrize("preset", ["pdd-mini", "colocated-mini"])
def test_tokens_tallied_at_once_give_the_records_their_sse_bytes_give(preset, monkeypatch):
    direct = _run(preset)
    chunks = []
    token = ChunkEncoder.token

    def encoded(self, text, first=False):
        chunks.append(text)
        return token(self, text, first)

    monkeypatch.setattr(ChunkEncoder, "token", encoded)
    monkeypatch.setattr(run_module, "complete", functools.partial(complete, through_bytes=True))
    through_bytes = _run(preset)
    assert len(chunks) == sum(r["output_tokens"] for r in direct[0]) > 100  # every token went as bytes
    assert direct == through_bytes  # timings, ids, itl, usage and the pdd object, to the last digit
