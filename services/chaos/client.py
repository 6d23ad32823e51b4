"""Send one completion and judge its outcome (services/chaos/outcomes.py).

Every request runs under a client deadline longer than the router's own
request deadline, so a router that keeps its promise always answers first:
reaching the client deadline means the request hung.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass

import aiohttp

from loadgen.sse import SseLineDecoder
from services.chaos.outcomes import FaultFreeText, Outcome

SSE_LINE_LIMIT = 1 << 20  # the final chunk carries the pdd stats and their timeline


@dataclass(frozen=True)
class Target:
    """Where requests go and how they are judged."""

    http: aiohttp.ClientSession
    url: str
    model: str
    expected: FaultFreeText
    clock_start: float  # perf_counter() at the start of the run: outcome times count from it
    deadline_s: float  # the client's deadline: the router's request deadline plus a margin

    def now(self) -> float:
        return time.perf_counter() - self.clock_start


class StreamJudge:
    """Reads SSE events of one answer and decides its outcome against the fault-free text."""

    def __init__(self, outcome: Outcome, expected_text: str, sent_at: float, clock_start: float) -> None:
        self.outcome, self.expected_text = outcome, expected_text
        self.sent_at, self.clock_start = sent_at, clock_start
        self.pieces: list[str] = []
        self.final = False
        self.decoder = SseLineDecoder()

    def feed_line(self, line: str) -> bool:
        """Feed one SSE line; True once the stream has given its outcome ([DONE] or an error event)."""
        data = self.decoder.feed(line)
        if data is None:
            return False
        if data.strip() == "[DONE]":
            self.finish()
            return True
        try:
            event = json.loads(data)
        except ValueError:
            return self.end("lost", f"unreadable SSE event {data[:120]!r}")
        if "error" in event:
            message = (event["error"] or {}).get("message") if isinstance(event["error"], dict) else None
            received = "".join(self.pieces)
            if not self.expected_text.startswith(received):
                # Wrong tokens, then an error: the error does not excuse what the client was already shown.
                return self.end("corrupted", f"tokens before the error differ from the fault-free text after "
                                             f"{_common_words(received, self.expected_text)} matching words; then: "
                                             f"{message or data[:120]}")
            return self.end("failed" if message else "lost", message or f"error event without a message: {data[:120]}")
        choice = (event.get("choices") or [{}])[0]
        text = choice.get("text") or (choice.get("delta") or {}).get("content") or ""
        if text:
            if not self.pieces:
                self.outcome.ttft_s = time.perf_counter() - self.sent_at
            self.pieces.append(text)
        if choice.get("finish_reason"):
            self.final = True
            self.note_stats(event.get("pdd"))
        return False

    def note_stats(self, pdd: dict | None) -> None:
        if pdd:
            self.outcome.pipeline = pdd.get("pipeline")
            self.outcome.reason = (pdd.get("policy") or {}).get("reason")
            self.outcome.degraded = pdd.get("degraded")

    def finish(self) -> None:
        text = "".join(self.pieces)
        self.outcome.tokens = len(text.split())  # one pseudo-word per token
        if not self.final:
            self.end("lost", f"[DONE] without a final chunk after {len(self.pieces)} tokens")
        elif text != self.expected_text:
            self.end("corrupted", f"text differs from the fault-free text after {_common_words(text, self.expected_text)} "
                                  f"matching words ({len(self.pieces)} pieces)")
        else:
            self.end("completed", "")

    def end(self, kind: str, message: str) -> bool:
        self.outcome.kind, self.outcome.message = kind, message
        self.outcome.end_s = time.perf_counter() - self.clock_start
        return True


def _common_words(a: str, b: str) -> int:
    count = 0
    for x, y in zip(a.split(), b.split()):
        if x != y:
            break
        count += 1
    return count


async def send_completion(target: Target, outcome: Outcome, prompt: list[int], max_tokens: int,
                          stream: bool = True) -> Outcome:
    """POST /v1/completions and judge the answer into `outcome`; never raises for a failed request."""
    http, url, deadline_s, clock_start = target.http, target.url, target.deadline_s, target.clock_start
    sent_at = time.perf_counter()
    outcome.send_s, outcome.streamed = sent_at - clock_start, stream
    request_id = outcome.request_id
    ids = target.expected.ids(prompt, max_tokens)
    judge = StreamJudge(outcome, target.expected.text(ids), sent_at, clock_start)
    body = {"model": target.model, "prompt": prompt, "max_tokens": max_tokens, "stream": stream}
    try:
        async with asyncio.timeout(deadline_s):
            async with http.post(f"{url}/v1/completions", json=body, headers={"x-request-id": request_id}) as reply:
                outcome.http_status = reply.status
                if reply.status != 200:
                    await _judge_error(reply, judge)
                elif stream:
                    await _judge_stream(reply, judge)
                else:
                    await _judge_body(reply, judge)
    except TimeoutError:
        judge.end("lost", f"no outcome within the client deadline of {deadline_s:g} s")
    except (aiohttp.ClientError, ConnectionError) as exc:
        judge.end("lost", f"connection broke without an error: {type(exc).__name__}: {exc}")
    if outcome.kind == "completed":
        outcome.output_ids = ids
    return outcome


async def _judge_error(reply: aiohttp.ClientResponse, judge: StreamJudge) -> None:
    text = await reply.text(errors="replace")
    try:
        message = json.loads(text)["error"]["message"]
    except (ValueError, KeyError, TypeError):
        message = None
    judge.end("failed" if message else "lost", message or f"HTTP {reply.status} without an error message: {text[:120]}")


async def _judge_stream(reply: aiohttp.ClientResponse, judge: StreamJudge) -> None:
    async for raw in reply.content:
        if judge.feed_line(raw.decode("utf-8", errors="replace")):
            return
    judge.end("lost", f"stream ended without [DONE] or an error after {len(judge.pieces)} tokens")


async def _judge_body(reply: aiohttp.ClientResponse, judge: StreamJudge) -> None:
    try:
        body = await reply.json(content_type=None)
        judge.pieces = [body["choices"][0]["text"]] if body["choices"][0]["text"] else []
        judge.final = body["choices"][0]["finish_reason"] is not None
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        judge.end("lost", f"unreadable body: {exc}")
        return
    judge.outcome.ttft_s = time.perf_counter() - judge.sent_at  # no stream: the whole answer is the first token
    judge.note_stats(body.get("pdd"))
    judge.finish()
