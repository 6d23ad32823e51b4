"""One streamed completion, measured from the client: what the mesh benchmarks and experiments send.

Unlike `loadgen.bench.client.stream_completion`, which turns every failure into
a record so that an open-loop run outlives it, a probe raises `StreamError` on
any failure: a benchmark that meets one has nothing to measure. The deadline is
the session's timeout (aiohttp.ClientTimeout), which the caller sets.
"""

from __future__ import annotations

import time

import aiohttp

from loadgen.bench.client import error_text, read_stream
from loadgen.sse import StreamError, StreamTally


async def probe_stream(http: aiohttp.ClientSession, url: str, model: str, prompt: list[int],
                       max_tokens: int) -> dict:
    """POST one streamed completion; its TTFT, end-to-end time, tokens, largest token gap and `pdd` stats."""
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "stream": True,
            "stream_options": {"include_usage": True}}
    tally = StreamTally(sent_at=time.perf_counter())
    async with http.post(f"{url.rstrip('/')}/v1/completions", json=body) as response:
        if response.status != 200:
            raise StreamError(f"HTTP {response.status}: {await error_text(response)}", f"http_{response.status}")
        await read_stream(response, tally)
    return {"ttft_s": tally.ttft_s, "e2e_s": tally.e2e_s, "tokens": len(tally.token_times),
            "max_gap_s": max(tally.itl_s, default=0.0), "output_ids": tally.output_ids, "pdd": tally.pdd}
