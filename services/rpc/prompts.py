"""Prompts a service holds between the CacheLookup that carried them and the call that names them.

A P-RLD-MD request looks up main decode and the relay (and, with several prefill pools,
each of them) before it sends them Generate or Prefill. The lookup carries the prompt's
ids; the service keeps them with their block hashes, computed there once, and the later
call carries a `HeldPrompt` (request id, length, fingerprint) instead of the ids again
(docs/mesh.md §Request flow). A held prompt is taken by the call that names it, so each
is used once; one no call names (a pool the router did not choose) leaves by its deadline
or by the size bound, oldest first.

Bounds (every table here has one):
- HELD_PROMPT_S: the router sends the naming call as soon as its lookups have answered, and
  the chain of lookups it awaits first is bounded by their deadlines (5 s for decode pools,
  2 s for the relay and for prefill pools: services/router/pipelines.py, pdd.py), plus one
  control-link delay (seconds on the worst WAN presets). A minute is several times that.
- HELD_PROMPT_TOKENS: 8M tokens of ids (32 MiB, and about 20 MiB of block hashes at 16-token
  blocks): 128 lookups of 64K-token prompts in flight at once, far more of short ones.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable

import numpy as np

HELD_PROMPT_S = 60.0
HELD_PROMPT_TOKENS = 8 * 1024 * 1024
NOT_HELD = "prompt not held"  # the details of the FAILED_PRECONDITION status that asks for the whole prompt


@dataclass(frozen=True, slots=True)
class Prompt:
    """A request's prompt at a service: its ids, their block hashes and their fingerprint, each computed once."""

    ids: np.ndarray
    hashes: list[int]
    fingerprint: int

    def __len__(self) -> int:
        return len(self.ids)


class PromptNotHeld(LookupError):
    """A call named a prompt this service does not hold (any more): the sender resends it whole."""


@dataclass(slots=True)
class _Entry:
    prompt: Prompt
    expires: float


class HeldPrompts:
    """Prompts by the request id of the lookup that carried them; bounded in tokens and in time."""

    def __init__(self, max_tokens: int = HELD_PROMPT_TOKENS, keep_s: float = HELD_PROMPT_S,
                 now: Callable[[], float] | None = None) -> None:
        """`now`: monotonic seconds; None: time.monotonic, read at each call (a simulation swaps it)."""
        self.max_tokens, self.keep_s = max_tokens, keep_s
        self._now = now or (lambda: time.monotonic())
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self.tokens = 0
        self.held = self.taken = self.expired = self.evicted = self.refused = 0

    def __len__(self) -> int:
        return len(self._entries)

    def hold(self, request_id: str, prompt: Prompt) -> None:
        """Keep `prompt` for the call that will name `request_id` (a newer lookup of that id replaces it)."""
        self._drop(request_id)
        self._expire()
        if len(prompt) > self.max_tokens:
            return  # larger than the whole table: the naming call is refused and resends it
        while self.tokens + len(prompt) > self.max_tokens:
            self._drop(next(iter(self._entries)))
            self.evicted += 1
        self._entries[request_id] = _Entry(prompt, self._now() + self.keep_s)
        self.tokens += len(prompt)
        self.held += 1

    def take(self, request_id: str, length: int, fingerprint: int) -> Prompt:
        """The prompt held under `request_id`, removed; PromptNotHeld unless its length and fingerprint match."""
        self._expire()
        entry = self._entries.get(request_id)
        if entry is None or len(entry.prompt) != length or entry.prompt.fingerprint != fingerprint:
            self.refused += 1
            why = "none under that id" if entry is None else "another prompt under that id"
            raise PromptNotHeld(f"{NOT_HELD}: {request_id} ({why}; send its ids)")
        self._drop(request_id)
        self.taken += 1
        return entry.prompt

    def stats(self) -> dict[str, int]:
        return {"held_now": len(self._entries), "held_tokens": self.tokens, "held": self.held, "taken": self.taken,
                "expired": self.expired, "evicted": self.evicted, "refused": self.refused}

    def _drop(self, request_id: str) -> None:
        entry = self._entries.pop(request_id, None)
        if entry is not None:
            self.tokens -= len(entry.prompt)

    def _expire(self) -> None:
        """Entries are in deadline order (every one gets the same keep_s), so only the oldest are checked."""
        now = self._now()
        while self._entries:
            request_id, entry = next(iter(self._entries.items()))
            if entry.expires > now:
                return
            self._drop(request_id)
            self.expired += 1
