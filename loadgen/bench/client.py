"""Send one streamed completion and measure it from the client side.

Every request has a deadline (send to last byte). Failures become records with
a status and a message, never exceptions: an open-loop run must outlive them.
"""

from __future__ import annotations

import asyncio
import time

import aiohttp

from loadgen.bench.records import RequestRecord
from loadgen.plan import RequestPlan
from loadgen.sse import SseLineDecoder, StreamError, StreamTally, error_message

SSE_LINE_LIMIT = 1 << 20  # a final chunk with a long pdd.timeline must still fit in one line


async def stream_completion(
    http: aiohttp.ClientSession,
    endpoint: str,
    model: str,
    plan: RequestPlan,
    *,
    timeout_s: float,
    send_s: float,
    vocab: int,
) -> tuple[RequestRecord, list[int]]:
    """POST the plan with stream=true; return its record and the output token ids received."""
    payload = {"model": model, "prompt": plan.prompt, "max_tokens": plan.max_tokens, "stream": True,
               "stream_options": {"include_usage": True}}
    headers = {"x-request-id": plan.request_id, "Accept": "text/event-stream"}
    record = RequestRecord.sent(plan, send_s)
    tally = StreamTally(sent_at=time.perf_counter(), vocab=vocab)
    try:
        async with asyncio.timeout(timeout_s):
            async with http.post(endpoint, json=payload, headers=headers) as response:
                record.http_status = response.status
                if response.status >= 400:
                    message = f"HTTP {response.status}: {await error_text(response)}"
                    raise StreamError(message, f"http_{response.status}")
                await read_stream(response, tally)
    except TimeoutError:
        record.status, record.error = "timeout", f"no complete answer within {timeout_s:g}s"
    except StreamError as error:
        record.status, record.error = "error", f"{error.code}: {error}"
    except (aiohttp.ClientError, ValueError) as error:
        record.status, record.error = "error", f"connection: {type(error).__name__}: {error}"
    except asyncio.CancelledError:
        # only the run itself cancels a request (Ctrl-C); it awaits this record to keep partial results
        record.status, record.error = "cancelled", "run interrupted"
    fill_measurements(record, tally)
    record.elapsed_s = time.perf_counter() - tally.sent_at
    return record, tally.output_ids


async def read_stream(response: aiohttp.ClientResponse, tally: StreamTally) -> None:
    """Feed every SSE event to the tally up to [DONE]; StreamError if the stream broke its contract."""
    decoder = SseLineDecoder()
    async for raw_line in response.content:
        data = decoder.feed(raw_line.decode("utf-8", errors="replace"))
        if data is not None:
            tally.feed_event(data, time.perf_counter())
            if tally.done:
                break
    tally.check_complete()


async def error_text(response: aiohttp.ClientResponse) -> str:
    """The message of an error response: its OpenAI-style error message, else its first 500 characters."""
    text = await response.text(errors="replace")
    try:
        return error_message(await response.json(content_type=None))
    except ValueError:
        return text[:500]


def fill_measurements(record: RequestRecord, tally: StreamTally) -> None:
    record.output_tokens = len(tally.token_times)
    record.ttft_s = tally.ttft_s
    record.itl_s = tally.itl_s
    record.finish_reason = tally.finish_reason
    record.usage = tally.usage
    record.pdd = tally.pdd
    if record.ok:
        record.e2e_s = tally.e2e_s
        record.tpot_s = tally.tpot_s

