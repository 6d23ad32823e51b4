"""The pipeline estimate with streamed KV: what main decode still waits for after prefill ends.

With `kv_streaming` each prefill chunk's KV leaves when its step ends
(services/kv/stream.py), so the WAN carries most of the KV while prefill still
computes. The router predicts when each chunk ends from the prefill pool's
roofline (a lone request: a busier pool computes slower, which only hides more
of the transfer) and the line as a FIFO (docs/engine.md, "Streamed KV"):

    f_1 = e_1 + (queued + b_1) x 8 / rate
    f_i = max(e_i, f_{i-1}) + b_i x 8 / rate
    wait = delay + f_n - e_n

for chunks ending at e_i carrying b_i missing bytes. Without streaming there is
one part, at prefill's end, and the wait is PipelinePolicy's delay + bytes / rate.
The prefill is assumed to compute what main decode lacks: both caches hold the
same shared prefixes, and what prefill holds beyond that only shortens it.
"""

from __future__ import annotations

from services.engine.batch import Chunk, StepBatch
from services.engine.roofline import RooflineClock
from services.profiles import load_gpu, load_model
from services.scenario import LinkSpec, Scenario
from services.types import Role

Part = tuple[float, int]  # (seconds after prefill starts at which it is computed, emulated bytes)


class PrefillChunks:
    """When each chunk of a lone prompt's prefill ends, on the scenario's first prefill pool."""

    def __init__(self, scenario: Scenario) -> None:
        pool = next(p for p in scenario.pools if p.role is Role.PREFILL)
        self.clock = RooflineClock(load_gpu(pool.gpu), load_model(scenario.model), tp=pool.tp,
                                   dp_attention=pool.dp_attention, ep=pool.ep, **pool.layout)
        engine = scenario.engine
        self.chunk_tokens = engine.long_prefill_token_threshold or engine.max_batched_tokens
        self.dilation = scenario.time_dilation

    def parts(self, hit_tokens: int, prompt_tokens: int, kv_bytes_per_token: int) -> list[Part]:
        """The missing KV (tokens hit_tokens.. of the prompt) as the chunks that compute it produce it."""
        out, t = [], 0.0
        for done in range(hit_tokens, prompt_tokens, self.chunk_tokens):
            tokens = min(self.chunk_tokens, prompt_tokens - done)
            t += self.dilation * self.clock.step_seconds(StepBatch(chunks=(Chunk(tokens, done),)))
            out.append((t, tokens * kv_bytes_per_token))
        return out


def streamed_wait_s(wan: LinkSpec, parts: list[Part], queued_bytes: int) -> float:
    """Seconds from prefill's end until the last byte lands, each part leaving once computed (above)."""
    if not parts:
        return wan.delay_s + queued_bytes * 8 / wan.rate_bps
    finish = parts[0][0] + queued_bytes * 8 / wan.rate_bps
    for end_s, nbytes in parts:
        finish = max(end_s, finish) + nbytes * 8 / wan.rate_bps
    return wan.delay_s + finish - parts[-1][0]
