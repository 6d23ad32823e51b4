"""The work unit of an engine: what a service submits, what it gets back, and the engine's view of it."""

from __future__ import annotations

import asyncio
import enum
import math
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, NamedTuple

import numpy as np

from services.engine.pieces import BYTE_TOKENS
from services.engine.prefix_cache import extend_block_hashes
from services.engine.tokens import prompt_fingerprint, stream_key
from services.types import Seconds, TokenId


class EngineFull(ValueError):
    """The request can never fit this instance (KV capacity, context limit) or its queue is full."""


class EngineStopped(RuntimeError):
    """The engine stopped (or its loop failed) before the request finished."""


@dataclass(slots=True)
class Sequence:
    """One request as an engine sees it.

    `context` is the prompt plus any output already generated elsewhere (after a handoff);
    context[kv_from:kv_tokens] has KV on this instance already (received over a link). The
    first `kv_from` tokens are not received: the instance's prefix cache (either tier) holds
    them, or it computes them again before the received KV can be used.
    The engine computes the rest, then generates `generate` tokens at output positions
    first_position, first_position + 1, ... where first_position == len(context) - prompt_len.
    """

    request_id: str
    context: list[TokenId] | np.ndarray  # read once: the engine keeps its length and last partial block
    prompt_len: int
    kv_tokens: int
    generate: int
    first_position: int
    seed: int
    fingerprint: int | None = None  # of context[:prompt_len]; computed when absent
    block_hashes: list[int] | None = None  # of context's leading full blocks, if the caller has them; extended here
    kv_from: int = 0  # where the received KV starts: the sender's view of this instance's cached prefix


class TokenEvent(NamedTuple):  # a tuple: one is built per generated token
    position: int  # output position: 0 is the first generated token
    token_id: TokenId
    t: Seconds  # loop.time() at which the step that produced it ended


@dataclass(slots=True)
class SequenceStats:
    request_id: str
    submitted_t: Seconds
    hit_tokens: int = 0  # KV present at admission: max(received kv_tokens, prefix-cache hit)
    cache_hit_tokens: int = 0  # the prefix-cache part alone (both tiers)
    host_hit_tokens: int = 0  # of which loaded from the host-memory tier
    preemptions: int = 0  # times its KV was freed to make room and recomputed later
    computed_tokens: int = 0  # tokens this instance ran through the model (chunks and decodes)
    generated_tokens: int = 0
    chunks: list[int] = field(default_factory=list)  # sizes of the prefill/extend chunks, in order
    first_scheduled_t: Seconds | None = None  # start of the first step that included it
    prefill_done_t: Seconds | None = None  # context computed (first token produced unless held)
    first_token_t: Seconds | None = None
    finished_t: Seconds | None = None

    @property
    def queued_s(self) -> Seconds | None:
        return None if self.first_scheduled_t is None else self.first_scheduled_t - self.submitted_t


@dataclass(frozen=True, slots=True)
class FinishedEvent:
    stats: SequenceStats


class Status(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"
    CANCELLED = "cancelled"
    FAILED = "failed"


_END = object()  # closes an event stream without a FinishedEvent (cancel)


class EventChannel:
    """A one-reader queue; asyncio.Queue's bookkeeping costs more than the rest of a token's path."""

    __slots__ = ("_items", "_waiter", "sink", "_loop")

    def __init__(self) -> None:
        self._items: deque[object] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # asyncio.get_running_loop() costs a getpid()
        # Offered each item first while nothing is queued; True: taken, so no reader wakes for it.
        self.sink: Callable[[object], bool] | None = None

    def put(self, item: object) -> None:
        sink = self.sink
        if sink is not None and not self._items and sink(item):
            return
        self._items.append(item)
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def clear(self) -> None:
        """Drop what is queued: its reader has left."""
        self._items.clear()

    async def get(self) -> object:
        while not self._items:
            if self._waiter is not None:
                raise RuntimeError("a sequence's events are already being read by another task")
            if self._loop is None:
                self._loop = asyncio.get_running_loop()
            waiter = self._waiter = self._loop.create_future()
            try:
                await waiter
            finally:
                if self._waiter is waiter:
                    self._waiter = None
        return self._items.popleft()


class SequenceState:
    """The engine's mutable view of a submitted Sequence; the scheduler reads and advances it."""

    __slots__ = (
        "request_id", "context_len", "tail", "prompt_len", "computed", "chunk_origin", "end_position", "limit",
        "hashes", "published_blocks", "total_blocks", "kv_tokens", "key", "status", "stats", "events",
        "pending_load_tokens", "kv_from", "_block_size", "progress_waiter",
    )

    def __init__(self, seq: Sequence, block_size: int, vocab_size: int, now: Seconds) -> None:
        self.request_id = seq.request_id
        if isinstance(seq.context, np.ndarray):  # a role's received ids, used as they are
            tokens = seq.context.astype(np.int64, copy=False)  # np.append of [] gives floats
        else:
            tokens = np.fromiter(seq.context, dtype=np.int64, count=len(seq.context))
        # The engine reads a context's ids only to hash its blocks, so it keeps its length and the
        # ids past its last full block (`tail`), not a list of 64K Python ints per prompt.
        self.context_len = len(tokens)
        self.prompt_len = seq.prompt_len
        self.kv_tokens = seq.kv_tokens
        self.kv_from = seq.kv_from
        self.computed = 0
        self.chunk_origin = 0  # chunks are cut at chunk-size boundaries counted from here
        self.end_position = seq.first_position + seq.generate
        self.limit: int | None = None  # positions >= limit are held back (pause / set_limit)
        self._block_size = block_size
        validate(seq, vocab_size, tokens)
        self.hashes = extend_block_hashes(list(seq.block_hashes or ()), tokens, block_size)
        self.tail: list[TokenId] = tokens[len(self.hashes) * block_size :].tolist()
        self.published_blocks = 0
        self.pending_load_tokens = 0  # host-tier KV to load in the first step that schedules it
        # KV is needed for every token but the last one generated, whose KV is never computed.
        self.total_blocks = math.ceil((seq.prompt_len + self.end_position - 1) / block_size)
        fingerprint = seq.fingerprint
        if fingerprint is None:
            fingerprint = prompt_fingerprint(tokens[: seq.prompt_len])
        self.key = stream_key(fingerprint, seq.seed)
        self.status = Status.WAITING
        self.stats = SequenceStats(request_id=seq.request_id, submitted_t=now)
        self.events = EventChannel()
        # Resolved when a step has computed part of this prompt, or the sequence ends: what
        # SequenceHandle.prefill_progress waits on, instead of on every step of the engine.
        self.progress_waiter: asyncio.Future[None] | None = None

    @property
    def next_position(self) -> int:
        return self.context_len - self.prompt_len

    @property
    def held(self) -> bool:
        return self.limit is not None and self.next_position >= self.limit

    @property
    def is_decode(self) -> bool:
        """One token left to compute on top of existing KV: a decode (docs/engine.md, "Decode or chunk")."""
        return self.context_len - self.computed == 1 and self.computed > 0

    @property
    def computable(self) -> int:
        """Tokens it may compute now; a held sequence stops one short so it produces no token."""
        target = self.context_len - 1 if self.held else self.context_len
        if self.computed < self.kv_from:  # the prefix below the received KV first; the planner then skips it
            target = min(target, self.kv_from)
        return target - self.computed

    def append(self, ids: list[TokenId]) -> None:
        """Grow the context by `ids` (a generated token, or a handoff's tokens)."""
        self.context_len += len(ids)
        self.tail.extend(ids)
        if len(self.tail) >= self._block_size:
            self.hash_tail()

    def hash_tail(self) -> None:
        """Chain the tail's full blocks onto `hashes`; the tail keeps the ids of the block being filled."""
        start = len(self.hashes) * self._block_size
        extend_block_hashes(self.hashes, self.tail, self._block_size, offset=start)
        del self.tail[: len(self.hashes) * self._block_size - start]

    def close(self, status: Status, outcome: object = _END) -> None:
        self.status = status
        self.events.put(outcome)
        # Nothing follows the outcome. A sink is a closure over its reader's state, which holds this
        # sequence's handle (the relay's ledger, services/relay_decode/relay.py): left in place, that
        # cycle keeps the sequence's block hashes alive until the cyclic collector finds it.
        self.events.sink = None
        self.progressed()

    def progressed(self) -> None:
        """Wake the prefill_progress reader, if one waits."""
        waiter, self.progress_waiter = self.progress_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


def validate(seq: Sequence, vocab_size: int, tokens: np.ndarray) -> None:
    """Reject malformed sequences with a message that names the field."""
    n = len(seq.context)
    if not 1 <= seq.prompt_len <= n:
        raise ValueError(f"{seq.request_id}: prompt_len {seq.prompt_len} must be in 1..len(context)={n}")
    if not 0 <= seq.kv_tokens <= n:
        raise ValueError(f"{seq.request_id}: kv_tokens {seq.kv_tokens} must be in 0..len(context)={n}")
    if not 0 <= seq.kv_from <= seq.kv_tokens:
        raise ValueError(f"{seq.request_id}: kv_from {seq.kv_from} must be in 0..kv_tokens={seq.kv_tokens}")
    if seq.generate < 1:
        raise ValueError(f"{seq.request_id}: generate must be at least 1, got {seq.generate}")
    if seq.first_position != n - seq.prompt_len:
        raise ValueError(
            f"{seq.request_id}: first_position {seq.first_position} must equal the output tokens already "
            f"in context ({n} - {seq.prompt_len} = {n - seq.prompt_len})"
        )
    if tokens.min() < 0 or tokens.max() >= vocab_size + BYTE_TOKENS:  # a prompt may hold byte tokens (pieces.py)
        raise ValueError(f"{seq.request_id}: token ids must be in 0..{vocab_size + BYTE_TOKENS - 1}")
