"""The article's KV case as message sizes: the missed-suffix KV of an agentic 64K-context workload.

Requests arrive as a Poisson process; each one's prefix hit is drawn from the
seven-bin mix (loadgen/hitbins.py, mean about 90%); what crosses the WAN is the
KV of the missed suffix, at least one token's worth (the last prompt token is
never cached). `transfer_all` sends every message on its own connection of a
link at its arrival time and returns each transfer's duration
(docs/simulate.md, "The links").
"""

from __future__ import annotations

import asyncio
import random

from loadgen.hitbins import DEFAULT_HIT_WEIGHTS, HIT_BIN_EDGES, bin_bounds
from netem.virtual import VirtualLink

CONTEXT_TOKENS = 65536  # the report's agentic context
TRANSFER_DEADLINE_S = 3600.0  # in the loop's time: only a hang reaches it

Message = tuple[float, int]  # (arrival in seconds, bytes)


def kv_messages(rng: random.Random, rate_rps: float, requests: int, kv_bytes_per_token: int,
                context_tokens: int = CONTEXT_TOKENS) -> list[Message]:
    t, out = 0.0, []
    for _ in range(requests):
        t += rng.expovariate(rate_rps)
        low, high = bin_bounds(rng.choices(range(len(HIT_BIN_EDGES)), DEFAULT_HIT_WEIGHTS)[0])
        missed = max(1, int(context_tokens * (1.0 - rng.uniform(low, high))))
        out.append((t, missed * kv_bytes_per_token))
    return out


async def transfer_all(link: VirtualLink, messages: list[Message]) -> list[float]:
    """Seconds from arrival to the last byte delivered, per message, in the order given."""
    loop = asyncio.get_running_loop()

    async def one(at: float, nbytes: int) -> float:
        await asyncio.sleep(at - loop.time())
        await link.send("up", nbytes)
        return loop.time() - at

    return await asyncio.wait_for(asyncio.gather(*(one(at, n) for at, n in messages)), TRANSFER_DEADLINE_S)
