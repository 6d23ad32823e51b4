"""How long the router waits for a peer's call, sized to the work the call asks for (docs/hangs.md).

A crashed peer fails its calls at once (its connections reset); a hung one (SIGSTOP, a wedged
event loop) keeps them open and answers nothing. So each call has a deadline of its own, the
time the call's work should take plus an allowance for the host:

    small   = HOST_ALLOWANCE_S + rtt(router, service)       (CacheLookup, CancelTransfer, SetLimit)
    prefill = HOST_ALLOWANCE_S + rtt(router, pool) + max rtt(pool, receiver)
              + SLACK x dilation x (roofline_s(prompt) + outstanding_s(pool))

`roofline_s(n)` is the pool's roofline time of a lone n-token prompt computed in the engine's
chunks, from no cached token (an upper bound: prefill's own prefix cache only shortens it) and
rounded up to whole chunks; `outstanding_s(pool)` is the same sum over the prefills this router
has sent the pool that have not answered yet, taken as run one after another (the pool's
instances and its batching only make them faster), so a queue at the pool lengthens the deadline
instead of being taken for a hang. `rtt` is twice the propagation of the control route a call
crosses between datacenters (zero where gRPC goes directly); Prefill also waits for its
receivers' acknowledgements of the transfer announce. A small call's work is a table lookup (a
lookup hashes the prompt's blocks), and its request (a lookup's: 4 bytes a token id) takes well
under a millisecond on any line: only the allowance and the round trip count.

When Prefill's deadline passes, the router asks the pool's Health with HOST_ALLOWANCE_S to answer
(`services/router/peers.py`): a pool that answers is busy, not hung, and the call gets another
deadline; one that does not is taken as down, and the request takes the path a crashed pool gives
it (docs/reliability.md, "Each fault and what the mesh does"). A lookup that misses its deadline
is a pool that did not answer, passed over as before.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from contextlib import contextmanager
from typing import Iterator

from services.engine.roofline import RooflineClock
from services.profiles import load_gpu, load_model
from services.scenario.plan import MeshPlan

# The host's allowance: how late a healthy peer may answer on a loaded machine. Above the largest
# fault-free TTFT p99 the chaos warm-ups measured on the shared 2-core machine (2.3 s, pd-cross,
# load average 6-11: docs/reliability.md, "Per fault and mode"), which covers a whole request's
# scheduling, queueing and compute, so a call the host merely delays is never taken for a hang.
HOST_ALLOWANCE_S = 2.5
# An assumption, not fitted: a prefill may run at half its predicted speed before it is suspected.
# The roofline is within 10% of measured step times (docs/roofline.md); the rest is the emulated
# step's own lateness on a loaded host (docs/hangs.md).
SLACK = 2.0


class CallDeadlines:
    """Each call's deadline for one router, and the prefill work it has outstanding at each pool."""

    def __init__(self, plan: MeshPlan, host_allowance_s: float = HOST_ALLOWANCE_S) -> None:
        self.plan, self.host_allowance_s = plan, host_allowance_s
        engine = plan.scenario.engine
        self.chunk_tokens = engine.long_prefill_token_threshold or engine.max_batched_tokens
        self.outstanding_s: dict[str, float] = defaultdict(float)
        self._clocks: dict[str, RooflineClock] = {}

    def rtt_s(self, consumer: str, target: str) -> float:
        """Round-trip propagation of the control route from `consumer` to `target`'s gRPC port, 0 if direct."""
        link = self.plan.control_link(self.plan.service(consumer).dc, target, "grpc")
        return 0.0 if link is None else 2 * link.spec.delay_s

    def small_s(self, service: str) -> float:
        """A call that asks for no compute (a lookup, a cancellation, a relay's cap): allowance and round trip."""
        return self.host_allowance_s + self.rtt_s(self.plan.router.name, service)

    def prefill_s(self, pool: str, prompt_tokens: int, receivers: tuple[str, ...] = ()) -> float:
        """Prefill's deadline at `pool` for a prompt of `prompt_tokens`, its KV announced to `receivers`."""
        announce = max((self.rtt_s(pool, r) for r in receivers), default=0.0)
        work = self.roofline_s(pool, prompt_tokens) + self.outstanding_s[pool]
        return (self.host_allowance_s + self.rtt_s(self.plan.router.name, pool) + announce
                + SLACK * self.plan.scenario.time_dilation * work)

    def roofline_s(self, pool: str, prompt_tokens: int) -> float:
        """The pool's roofline time of a lone prompt of `prompt_tokens`, rounded up to whole chunks."""
        chunks = max(1, -(-prompt_tokens // self.chunk_tokens))
        return self._chunks_s(pool, chunks)

    @contextmanager
    def prefilling(self, pool: str, prompt_tokens: int) -> Iterator[None]:
        """Count a prefill as outstanding at `pool` while the call is open."""
        seconds = self.roofline_s(pool, prompt_tokens)
        self.outstanding_s[pool] += seconds
        try:
            yield
        finally:
            left = self.outstanding_s[pool] - seconds
            self.outstanding_s[pool] = left if left > 1e-9 else 0.0  # no float residue at rest

    @functools.lru_cache(maxsize=256)  # noqa: B019 - one instance per router, a few pools and lengths
    def _chunks_s(self, pool: str, chunks: int) -> float:
        clock = self._clocks.get(pool)
        if clock is None:
            spec = self.plan.service(pool).pool
            clock = self._clocks[pool] = RooflineClock(
                load_gpu(spec.gpu), load_model(self.plan.scenario.model), tp=spec.tp,
                dp_attention=spec.dp_attention, ep=spec.ep)
        return clock.chunked_prefill_seconds(chunks * self.chunk_tokens, self.chunk_tokens)
