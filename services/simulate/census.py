"""A census of the in-process mesh's control plane: every request its servicers get, per hop.

The simulated mesh (services/simulate/wiring.py) runs the mesh's servicers and router
on virtual time; a `MessageCensus` wraps every servicer method to count the requests it
gets from each caller, their serialised size (protobuf `ByteSize`, without HTTP/2 framing)
and how many of them carry the prompt's token ids. Counts are exact, not timed, so one
request is enough (benchmarks/bench_prompt_bytes.py; docs/mesh.md §Request flow).
"""

from __future__ import annotations

import collections
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

from services.router.api import CompletionRequest
from services.router.fanout import plan_jobs
from services.router.pipelines import Token
from services.scenario.loader import load_scenario
from services.simulate.clock import VirtualClock, process_clocks, virtual_runner
from services.simulate.wiring import SimulatedMesh, simulated_plan

METHODS = ("Prefill", "CacheLookup", "Generate", "Announce", "Handoff", "SetLimit", "CancelTransfer")


@dataclass
class Hop:
    messages: int = 0
    bytes: int = 0
    prompt_messages: int = 0  # requests carrying the prompt's packed ids
    prompt_bytes: int = 0


class MessageCensus:
    """Every request a simulated mesh's servicers get, by (caller, service, method)."""

    def __init__(self, mesh: SimulatedMesh) -> None:
        self.hops: dict[tuple[str, str, str], Hop] = collections.defaultdict(Hop)
        for name, servicer in mesh.servicers.items():
            for method in (m for m in METHODS if hasattr(servicer, m)):
                setattr(servicer, method, self._counting(name, method, getattr(servicer, method)))

    def _counting(self, service: str, method: str, handler: Callable) -> Callable:
        def counted(request, context):
            hop = self.hops[(context.peer().removeprefix("inproc:"), service, method)]
            hop.messages += 1
            hop.bytes += request.ByteSize()
            prompt = len(getattr(request, "prompt_ids", b""))
            if prompt:
                hop.prompt_messages += 1
                hop.prompt_bytes += prompt
            return handler(request, context)  # a coroutine, or the stream's async generator
        return counted

    def per_link(self) -> dict[tuple[str, str], Hop]:
        """The hops summed over methods: (caller, service) -> totals."""
        out: dict[tuple[str, str], Hop] = collections.defaultdict(Hop)
        for (caller, service, _), hop in self.hops.items():
            total = out[(caller, service)]
            for name in vars(hop):
                setattr(total, name, getattr(total, name) + getattr(hop, name))
        return out


def prompt_of_length(tokens: int, salt: int = 1) -> list[int]:
    """A fresh prompt (no prefix held anywhere), as tests/integration/test_pdd.py builds them."""
    return [(i * 7919 + salt * 104729) % 50000 for i in range(tokens)]


class OneRequest(NamedTuple):
    pdd: dict
    token_ids: list[int]
    census: MessageCensus
    prepared: Any  # what `prepare(mesh)` returned


async def _one_request(prompt: list[int], max_tokens: int, scenario: str,
                       prepare: Callable[[SimulatedMesh], Any]) -> OneRequest:
    async with SimulatedMesh(simulated_plan(load_scenario(scenario))) as mesh:
        census, extra = MessageCensus(mesh), prepare(mesh)
        router = mesh.router
        body = CompletionRequest.model_validate({"model": router.scenario.model, "prompt": prompt,
                                                 "max_tokens": max_tokens},
                                                context={"vocab_size": router.model.vocab_size})
        job, _ = plan_jobs(router, "census-1", body, False)[0]
        pdd, token_ids = None, []
        async for item in router.run(job):
            if type(item) is Token:
                token_ids.append(item.token_id)
            else:
                pdd = item.pdd
        return OneRequest(pdd, token_ids, census, extra)


def census_of_one_request(prompt: list[int], max_tokens: int, scenario: str = "pdd-mini",
                          prepare: Callable[[SimulatedMesh], Any] = lambda mesh: None) -> OneRequest:
    """One request on a simulated mesh, no socket opened; `prepare(mesh)` is called once the mesh
    has started, before the request."""
    with virtual_runner() as runner, process_clocks(VirtualClock(runner.get_loop())):
        return runner.run(_one_request(prompt, max_tokens, scenario, prepare))
