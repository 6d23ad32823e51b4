"""What happened to one request, judged against the text it must have had without any fault.

The token at output position i is a pure function of (prompt, i, seed)
(services/engine/tokens.py), so the fault-free answer of every request is known
before it is sent. Each request ends in exactly one of these kinds:

- completed: the stream ended with its final chunk and [DONE], and its text is
  exactly the fault-free text (nothing lost, repeated or reordered);
- failed:    an explicit error: an HTTP status with an error message, or an SSE
  error event;
- lost:      anything else: no outcome by the deadline (a hang), a stream that
  ended without its final chunk or an error (silent truncation), a dropped
  connection, an error without a message;
- corrupted: a "complete" answer whose text differs from the fault-free one;
- abandoned: the client itself hung up on purpose (the slow-consumer scenario).

Only completed, failed and abandoned are acceptable; lost and corrupted are
invariant violations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from services.engine.tokens import WordTokenizer, output_token, prompt_fingerprint

KINDS = ("completed", "failed", "lost", "corrupted", "abandoned")


def fault_free_ids(prompt: list[int], max_tokens: int, seed: int, vocab: int) -> list[int]:
    fingerprint = prompt_fingerprint(prompt)
    return [output_token(fingerprint, i, seed, vocab) for i in range(max_tokens)]


class FaultFreeText:
    """The answer each request must get, from the deterministic token function."""

    def __init__(self, seed: int, vocab: int) -> None:
        self.seed, self.vocab = seed, vocab
        self.tokenizer = WordTokenizer(vocab)

    def ids(self, prompt: list[int], max_tokens: int) -> list[int]:
        return fault_free_ids(prompt, max_tokens, self.seed, self.vocab)

    def text(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids)


@dataclass
class Outcome:
    request_id: str
    tag: str  # which traffic sent it: steady, overload, slow-reader, hang-up, probe (a hang's)
    kind: str = "lost"
    send_s: float = 0.0  # seconds since the run started
    end_s: float = math.inf
    ttft_s: float | None = None
    http_status: int | None = None
    message: str = ""
    pipeline: str | None = None
    reason: str | None = None  # the router's policy reason, in PDD
    degraded: str | None = None  # the degraded mode that served it (services/router/degraded.py), if any
    tokens: int = 0
    streamed: bool = True
    output_ids: list[int] = field(default_factory=list, repr=False)

    @property
    def done(self) -> bool:
        return self.end_s != math.inf

    def healthy(self, ttft_bound_s: float) -> bool:
        """Completed, and (when streamed) its first token came within the fault-free bound."""
        if self.kind != "completed":
            return False
        return not self.streamed or (self.ttft_s is not None and self.ttft_s <= ttft_bound_s)

    def error_label(self) -> str:
        """A short label to group errors by: the status (or the kind of loss) and the message, less its id."""
        message = self.message.replace(self.request_id, "<id>")[:90]
        if self.kind != "failed":
            return f"{self.kind}: {message}"
        # A stream that had begun carries its error as an SSE event under the 200 it started with.
        return f"{'SSE error' if self.http_status == 200 else f'HTTP {self.http_status}'}: {message}"


def percentile(values: list[float], q: float) -> float | None:
    """Linear interpolation between ranks, as numpy's default (docs/loadgen.md)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (rank - low) * (ordered[high] - ordered[low])
