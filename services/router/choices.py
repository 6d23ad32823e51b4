"""One answer choice: its tokens, its stop-cut text, its emulated logprobs, as OpenAI shapes it.

A request fans out into one job per (prompt, n) pair; each job's tokens feed
one `Choice`. Choice `index` follows OpenAI's order: prompt-major, then n.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from services.engine.tokens import WordTokenizer, prompt_fingerprint
from services.router.logprobs import logprob_row
from services.router.stops import Ending

# Logprob rows one answer may carry (every choice's output tokens, and its echoed prompt): a row with 5
# alternatives took 16-24 us of CPU to make and 205 bytes of JSON on the 2-core machine (docs/mesh.md,
# "Logprobs"), so the bound keeps a whole answer's rows to about a quarter of a CPU second and 2 MB.
MAX_LOGPROB_TOKENS = 8192


@dataclass(frozen=True, slots=True)
class LogprobAsk:
    """What the request asked for: logprobs at all, and how many alternatives per token."""

    wanted: bool = False
    top: int = 0
    echo: bool = False


@dataclass
class Choice:
    index: int
    prompt_text: str  # the prompt as sent, for `echo`
    prompt_ids: np.ndarray | list[int]  # as the router took it in (uint32)
    ending: Ending
    tokenizer: WordTokenizer
    ask: LogprobAsk = LogprobAsk()
    token_ids: list[int] = field(default_factory=list)
    pieces: list[str] = field(default_factory=list)  # each token's text, before the stop cut
    chars: int = 0

    def add(self, token_id: int) -> str:
        """Record one token; return the new text the client may see (never past the stop cut)."""
        piece = self.tokenizer.token_text(token_id)
        self.token_ids.append(token_id)
        self.pieces.append(piece)
        before, self.chars = self.chars, self.chars + len(piece)
        cut = self.ending.text_chars
        if cut is None:  # no stop rule fired: every piece goes out whole (the common, per-token path)
            return piece
        return piece[: max(0, cut - before)]

    def output_text(self) -> str:
        return self.ending.cut("".join(self.pieces))

    @cached_property
    def fingerprint(self) -> int:
        return prompt_fingerprint(self.prompt_ids)

    def last_logprobs(self, chat: bool) -> dict[str, Any]:
        """The logprobs of the newest token, shaped for a streamed chunk."""
        position = len(self.token_ids) - 1
        tid = self.token_ids[-1]
        fingerprint = self.fingerprint
        row = (tid, *logprob_row(fingerprint, position, tid, self.ask.top, self.tokenizer.vocab_size))
        if chat:
            return {"content": [self._chat_entry(*row)]}
        word = self.tokenizer.token_text
        return {"tokens": [word(tid)], "token_logprobs": [row[1]], "top_logprobs": [{word(t): v for t, v in row[2]}],
                "text_offset": [self.chars - len(word(tid))]}

    def _logprob_rows(self) -> list[tuple[int, float | None, list[tuple[int, float]]]]:
        fingerprint = self.fingerprint
        vocab = self.tokenizer.vocab_size
        rows = []
        if self.ask.echo:
            count = len(self.prompt_ids)
            for i, tid in enumerate(map(int, self.prompt_ids)):
                first = i == 0  # nothing precedes the first prompt token, so it has no logprob (as in OpenAI)
                rows.append((tid, None, []) if first else
                            (tid, *logprob_row(fingerprint, i - count, tid, self.ask.top, vocab)))
        for i, tid in enumerate(self.token_ids):
            rows.append((tid, *logprob_row(fingerprint, i, tid, self.ask.top, vocab)))
        return rows

    def completion(self) -> dict[str, Any]:
        text = (self.prompt_text if self.ask.echo else "") + self.output_text()
        return {"index": self.index, "text": text, "logprobs": self._completion_logprobs(),
                "finish_reason": self.ending.finish_reason, "stop_reason": self.ending.stop_reason}

    def _completion_logprobs(self) -> dict[str, Any] | None:
        if not self.ask.wanted:
            return None
        word = self.tokenizer.token_text
        tokens, offsets, offset = [], [], 0
        rows = self._logprob_rows()
        for tid, _, _ in rows:
            tokens.append(word(tid))
            offsets.append(offset)
            offset += len(tokens[-1])
        return {"tokens": tokens, "token_logprobs": [lp for _, lp, _ in rows],
                "top_logprobs": [None if lp is None else {word(t): v for t, v in top} for _, lp, top in rows],
                "text_offset": offsets}

    def chat(self) -> dict[str, Any]:
        choice = {"index": self.index, "message": {"role": "assistant", "content": self.output_text()},
                  "logprobs": None, "finish_reason": self.ending.finish_reason,
                  "stop_reason": self.ending.stop_reason}
        if self.ask.wanted:
            choice["logprobs"] = {"content": [self._chat_entry(tid, lp, top) for tid, lp, top in self._logprob_rows()]}
        return choice

    def _chat_entry(self, token_id: int, logprob: float, top: list[tuple[int, float]]) -> dict[str, Any]:
        def entry(tid: int, value: float) -> dict[str, Any]:
            token = self.tokenizer.token_text(tid)
            return {"token": token, "logprob": value, "bytes": list(token.encode())}
        return {**entry(token_id, logprob), "top_logprobs": [entry(t, v) for t, v in top]}
