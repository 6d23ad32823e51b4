"""PDD's pipeline choice: P-MD when the missing KV crosses the WAN quickly, else P-RLD-MD.

The estimate (docs/pdd.md §Pipeline choice):

    t_est = delay + (bytes_missing + bytes_in_flight) x 8 / rate x correction

where bytes_missing = (prompt - MD's cached prefix) x KV bytes per token,
bytes_in_flight is what this router has dispatched over the WAN and not yet
seen land (the line's queue), and `correction` is an exponentially weighted
ratio of observed to predicted transfer times, so jitter and congestion the
router cannot see still move the threshold. A saturated relay sends requests
P-MD rather than queueing them; P-RLD is never chosen here.

With streamed KV (scenario `kv_streaming`) the caller passes the missing KV as
the prefill chunks that produce it, and the estimate is the time main decode
waits after prefill ends: the transfer less its overlap with prefill
(services/router/policy_stream.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from services.router.policy_stream import Part, streamed_wait_s
from services.scenario import LinkSpec, PddSpec
from services.types import Pipeline

EWMA_WEIGHT = 0.2
CORRECTION_BOUNDS = (0.5, 20.0)


@dataclass
class Choice:
    pipeline: Pipeline
    estimate_s: float
    missing_bytes: int
    reason: str


class PipelinePolicy:
    def __init__(self, wan: LinkSpec, spec: PddSpec) -> None:
        self.wan, self.spec = wan, spec
        self.in_flight_bytes = 0
        self.correction = 1.0

    def predict_s(self, emulated_bytes: int, queued_bytes: int = 0, parts: list[Part] | None = None) -> float:
        """Seconds from prefill's end to main decode holding the KV; `parts`: the bytes stream as computed."""
        if parts is not None:
            return streamed_wait_s(self.wan, parts, queued_bytes)
        return self.wan.delay_s + (emulated_bytes + queued_bytes) * 8 / self.wan.rate_bps

    def estimate_s(self, missing_bytes: int, parts: list[Part] | None = None) -> float:
        return self.predict_s(missing_bytes, self.in_flight_bytes, parts) * self.correction

    def transfer_is_short(self, missing_bytes: int, parts: list[Part] | None = None) -> bool:
        """choose() would send the request P-MD whatever the relay's load: it need not be looked up."""
        return self.estimate_s(missing_bytes, parts) <= self.spec.transfer_threshold_s

    def choose(self, missing_bytes: int, relay_load: float | None, parts: list[Part] | None = None) -> Choice:
        estimate = self.estimate_s(missing_bytes, parts)
        if estimate <= self.spec.transfer_threshold_s:
            return Choice(Pipeline.P_MD, estimate, missing_bytes, "transfer is short")
        if relay_load is None:
            return Choice(Pipeline.P_MD, estimate, missing_bytes, "no relay reachable")
        if relay_load >= self.spec.relay_max_load:
            return Choice(Pipeline.P_MD, estimate, missing_bytes, "relay saturated")
        return Choice(Pipeline.P_RLD_MD, estimate, missing_bytes, "transfer is long")

    def dispatched(self, emulated_bytes: int) -> None:
        self.in_flight_bytes += emulated_bytes

    def landed(self, emulated_bytes: int, observed_s: float, queued_bytes_at_send: int,
               parts: list[Part] | None = None) -> None:
        self.arrived(emulated_bytes)
        self.observe(emulated_bytes, observed_s, queued_bytes_at_send, parts)

    def arrived(self, emulated_bytes: int) -> None:
        """The bytes left the line (the router saw them land): they no longer queue ahead of later ones."""
        self.in_flight_bytes = max(0, self.in_flight_bytes - emulated_bytes)

    def observe(self, emulated_bytes: int, observed_s: float, queued_bytes_at_send: int,
                parts: list[Part] | None = None) -> None:
        """One measured wait after prefill (kv_transfer_s) moves the correction factor; 0 means no sample."""
        predicted = self.predict_s(emulated_bytes, queued_bytes_at_send, parts)
        if predicted > 0 and observed_s > 0:
            ratio = min(max(observed_s / predicted, CORRECTION_BOUNDS[0]), CORRECTION_BOUNDS[1])
            self.correction += EWMA_WEIGHT * (ratio - self.correction)
