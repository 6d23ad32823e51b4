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


def test_a_prompt_handed_over_as_an_array_gives_the_records_its_list_gives(monkeypatch):
    def run():
        result = run_simulation(load_scenario("pdd-mini"), "agentic:context=4K,turns=3", concurrency=4,
                                duration_s=6.0, seed=2)
        return [dataclasses.asdict(r) for r in result.records]

    arrays = []
    plan_of = run_module.complete

    async def without_arrays(router, plan, *args, **kwargs):
        arrays.append(plan.prompt_array is not None)
        return await plan_of(router, dataclasses.replace(plan, prompt_array=None), *args, **kwargs)

    handed = run()
    monkeypatch.setattr(run_module, "complete", without_arrays)
    assert run() == handed
    assert len(handed) > 8 and any(r["turn"] > 0 for r in handed)  # later turns too, built from outputs
    assert arrays and all(arrays)  # the agentic workload builds the array the client hands over
