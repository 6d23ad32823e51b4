"""The streamed completion as the client sees it: SSE lines in, token times and the final stats out.

Shared by the asyncio bench client and the gevent Locust user, so both count
tokens and compute TTFT, TPOT and ITL the same way (docs/loadgen.md). A chunk's
tokens are its `token_ids` when the server sends them, otherwise one token per
word of `text`, decoded as the emulator's tokenizer wrote it (loadgen/tokens.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from loadgen.tokens import DEFAULT_VOCAB, text_token_ids

DONE = "[DONE]"


class StreamError(Exception):
    """The server reported an error, or the stream broke its contract."""

    def __init__(self, message: str, code: str = "stream_error") -> None:
        super().__init__(message)
        self.code = code


class SseLineDecoder:
    """Joins `data:` lines into events; a blank line ends an event (the SSE framing)."""

    def __init__(self) -> None:
        self._data: list[str] = []

    def feed(self, line: str) -> str | None:
        """Feed one line (without its newline); returns an event's data when one is complete."""
        line = line.rstrip("\r\n")
        if not line:
            if not self._data:
                return None
            data, self._data = "\n".join(self._data), []
            return data
        if line.startswith("data:"):
            self._data.append(line[5:].removeprefix(" "))
        return None  # comments (":...") and other fields carry nothing we use


def error_message(body: object) -> str:
    """The message of an OpenAI-style error body, or the body itself."""
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        error = body["error"]
        return str(error.get("message") or error.get("type") or error)
    return str(body)[:500]


@dataclass
class StreamTally:
    """Accumulates one streamed response. Times are seconds on one monotonic clock."""

    sent_at: float
    vocab: int = DEFAULT_VOCAB
    token_times: list[float] = field(default_factory=list)
    output_ids: list[int] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict | None = None
    pdd: dict | None = None
    done: bool = False
    ended_at: float | None = None

    def feed_event(self, data: str, now: float) -> None:
        if data.strip() == DONE:
            self.done = True
            self.ended_at = now
            return
        try:
            payload = json.loads(data)
        except ValueError:
            raise StreamError(f"unreadable SSE event {data[:200]!r}", "bad_event") from None
        if "error" in payload:
            raise StreamError(error_message(payload), "server_error")
        self.ended_at = now
        for choice in payload.get("choices") or []:
            ids = choice.get("token_ids")
            if ids is None and choice.get("text"):
                ids = text_token_ids(choice["text"], self.vocab)
            self.add_tokens(ids or (), now)
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
        self.usage = payload.get("usage") or self.usage
        self.pdd = payload.get("pdd") or self.pdd

    def add_tokens(self, ids, now: float) -> None:
        """Output token ids that arrived at `now` (one chunk's)."""
        for token_id in ids:
            self.output_ids.append(int(token_id))
            self.token_times.append(now)

    def check_complete(self) -> None:
        if not self.done and self.finish_reason is None:
            raise StreamError("stream ended before the final chunk", "truncated")
        if not self.token_times:
            raise StreamError("stream carried no tokens", "no_tokens")

    @property
    def ttft_s(self) -> float | None:
        return self.token_times[0] - self.sent_at if self.token_times else None

    @property
    def e2e_s(self) -> float | None:
        return None if self.ended_at is None else self.ended_at - self.sent_at

    @property
    def itl_s(self) -> list[float]:
        times = self.token_times
        return [b - a for a, b in zip(times, times[1:])]

    @property
    def tpot_s(self) -> float | None:
        """(E2E - TTFT) / (tokens - 1); undefined for a single token."""
        if len(self.token_times) < 2 or self.e2e_s is None or self.ttft_s is None:
            return None
        return (self.e2e_s - self.ttft_s) / (len(self.token_times) - 1)
