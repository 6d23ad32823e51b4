"""Control-plane messages and bytes of one P-RLD-MD request, per hop, in the in-process mesh.

    .venv/bin/python -m benchmarks.bench_prompt_bytes [--tokens 65536] [--output 1000]

The simulated mesh (services/simulate/wiring.py) runs the mesh's servicers and router
on virtual time; here every servicer method is wrapped to count the requests it gets
from each caller, their serialised size (protobuf `ByteSize`, without HTTP/2 framing)
and how many of them carry the prompt's token ids. Counts are exact, not timed, so
one request is enough (docs/mesh.md §Request flow records the result).
"""

from __future__ import annotations

import argparse
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=65536)
    parser.add_argument("--output", type=int, default=1000)
    parser.add_argument("--scenario", default="pdd-mini")
    args = parser.parse_args()
    pdd, _, census, _ = census_of_one_request(prompt_of_length(args.tokens), args.output, args.scenario)
    print(f"{args.scenario}, {args.tokens}-token prompt, {args.output} output tokens: pipeline {pdd['pipeline']}")
    print(f"{'hop':34} {'messages':>8} {'bytes':>10} {'with prompt':>11} {'prompt bytes':>12}")
    for (caller, service), hop in sorted(census.per_link().items()):
        print(f"{caller + ' -> ' + service:34} {hop.messages:8d} {hop.bytes:10d} {hop.prompt_messages:11d} "
              f"{hop.prompt_bytes:12d}")
    for (caller, service, method), hop in sorted(census.hops.items()):
        print(f"  {caller} -> {service} {method}: {hop.messages} message(s), {hop.bytes} bytes")
    total = sum(h.bytes for h in census.hops.values())
    print(f"total request bytes: {total}  (prompt ids packed: {4 * args.tokens} bytes)")


if __name__ == "__main__":
    main()
