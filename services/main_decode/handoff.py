"""Main decode's side of the handoff: pull the relay's token ids, recompute them locally.

Once the prompt's KV has crossed the WAN, main decode asks the relay for the
ids it generated and runs them through one extend pass (timed by the roofline
clock inside main decode's current batch), then continues decoding. Two modes
(docs/pdd.md §Handoff):
- one-shot: stop the relay now, take every id at once; one larger stall.
- catch-up: while the relay keeps generating, take the backlog in chunks until
  it is within CLOSE_ENOUGH tokens, or stops shrinking, then stop the relay;
  several small stalls.
Catch-up is chosen when the backlog exceeds the threshold and the relay has
room (its load is below `busy_relay_load`); a busy relay is released at once.
The relay is a RelayPeer (services/roles.py) and the clock an argument: no I/O here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from services.engine.scheduler import Engine, SequenceHandle
from services.engine.sequence import Sequence
from services.relay_decode.relay import StopWhen
from services.roles import RelayPeer
from services.rpc.prompts import Prompt
from services.scenario import PddSpec
from services.types import Clock, HandoffMode, unix_time

CLOSE_ENOUGH = 2  # tokens: about one relay decode step


@dataclass
class HandoffOutcome:
    handle: SequenceHandle | None  # None: the relay finished the request itself
    mode: HandoffMode
    chunks: int
    cut: int  # first output position main decode produces
    started_unix: float
    finished_on_relay: bool = False


async def take_over_by_kv(relay: RelayPeer, engine: Engine, request, prompt: np.ndarray, me: str,
                          wait_transfer, kv_from: int = 0, received: Prompt | None = None,
                          clock: Clock = unix_time) -> HandoffOutcome:
    """pdd-kvship: stop the relay and receive the KV of its tokens over the WAN instead of recomputing.

    `kv_from`, here and in take_over: where the prompt KV that crossed the WAN starts (Sequence.kv_from).
    `received`: the prompt as this service took it in, whose block hashes and fingerprint the sequence
    starts from, so the engine hashes only the relay's ids (None: the engine hashes the whole context).
    """
    started = clock()
    final = await relay.handoff(request.request_id, 0, stop=True, ship_kv_to=me)
    ids = list(final.tokens)
    if final.finished:
        return HandoffOutcome(None, HandoffMode.ONE_SHOT, 0, len(ids), started, finished_on_relay=True)
    await wait_transfer(f"{request.request_id}/handoff")
    # The relay computed KV for every id but the last (a generated token's own KV comes with the next step).
    seq = Sequence(request_id=request.request_id, context=np.append(prompt, ids), prompt_len=len(prompt),
                   kv_tokens=len(prompt) + len(ids) - 1, generate=request.max_tokens - len(ids),
                   first_position=len(ids), seed=request.seed, kv_from=kv_from, **_known(received))
    return HandoffOutcome(engine.submit(seq), HandoffMode.ONE_SHOT, 1, len(ids), started)


def _known(received: Prompt | None) -> dict:
    """What a Sequence of the prompt need not compute again: its block hashes and fingerprint."""
    return {} if received is None else {"block_hashes": received.hashes, "fingerprint": received.fingerprint}


async def take_over(relay: RelayPeer, engine: Engine, request, prompt: np.ndarray, spec: PddSpec,
                    kv_from: int = 0, received: Prompt | None = None, clock: Clock = unix_time) -> HandoffOutcome:
    rid, max_tokens = request.request_id, request.max_tokens
    started = clock()
    # The relay applies the choice to the backlog it holds and stops at once unless it is a catch-up: a
    # one-shot handoff is one call, not a look at the backlog and then a second call to stop.
    one_shot = StopWhen(spec.catch_up_threshold, load_at_least=spec.busy_relay_load)
    first = await relay.handoff(rid, 0, stop=False, stop_when=one_shot)
    ids = list(first.tokens)
    # A relay that had finished before the call did not stop: the choice is read off its reply instead.
    catch_up = not first.stopped and not (first.finished and one_shot.holds(len(ids), lambda: first.relay_load))
    mode = HandoffMode.CATCH_UP if catch_up else HandoffMode.ONE_SHOT
    if first.finished:
        return HandoffOutcome(None, mode, 0, len(ids), started, finished_on_relay=True)
    if not catch_up:
        handle = _submit(engine, request, prompt, ids, False, kv_from, received)
        return HandoffOutcome(handle, mode, 1, len(ids), started)

    handle = _submit(engine, request, prompt, ids, True, kv_from, received)
    chunks, backlog = 1, len(ids)
    try:
        while True:
            await handle.caught_up()
            # The relay stops once the new backlog is within CLOSE_ENOUGH, no smaller than the last, or
            # the rest of the request. A round that spans several relay steps (a busy main decode) leaves
            # a backlog that never falls to CLOSE_ENOUGH; once it stops shrinking, waiting longer only
            # lets the relay run on.
            rule = StopWhen(CLOSE_ENOUGH, backlog_at_least=max(0, min(backlog, max_tokens - 1 - len(ids))))
            more = await relay.handoff(rid, len(ids), stop=False, stop_when=rule)
            stop = more.stopped
            backlog = len(more.tokens)
            if more.finished:
                handle.cancel()
                return HandoffOutcome(None, mode, chunks, len(ids) + len(more.tokens), started, True)
            if more.tokens:
                handle.extend(list(more.tokens))
                ids += more.tokens
                chunks += 1
            if stop:
                handle.set_limit(None)
                return HandoffOutcome(handle, mode, chunks, len(ids), started)
            handle.set_limit(len(ids))
    except BaseException:
        handle.cancel()
        raise


def _submit(engine: Engine, request, prompt: np.ndarray, ids: list[int], hold: bool, kv_from: int,
            received: Prompt | None) -> SequenceHandle:
    """Prompt KV is present from kv_from on (it crossed the WAN); the relay's ids are computed as an extend chunk."""
    seq = Sequence(request_id=request.request_id, context=np.append(prompt, ids), prompt_len=len(prompt),
                   kv_tokens=len(prompt), generate=request.max_tokens - len(ids), first_position=len(ids),
                   seed=request.seed, kv_from=kv_from, **_known(received))
    handle = engine.submit(seq)
    if hold:
        handle.set_limit(len(ids))  # compute the backlog, produce nothing until caught up
    return handle
