"""The relay ledger against a real engine: caps, cuts and what the handoff returns."""

import asyncio

import pytest

from services.engine.sequence import FinishedEvent, Sequence, TokenEvent
from services.engine.tokens import output_token, prompt_fingerprint
from services.relay_decode.relay import RelayLedger, StopWhen
from tests.services.engine.conftest import VOCAB, RecordingClock, make_engine, prompt  # noqa: F401 (fixture)



async def _relay(make_engine, ledger: RelayLedger, rid: str, max_tokens: int, cap: int):
    engine = await make_engine(RecordingClock(per_step_s=0.002))
    ids = prompt(64)
    first = output_token(prompt_fingerprint(ids), 0, 3, VOCAB)
    handle = engine.submit(Sequence(rid, ids + [first], prompt_len=64, kv_tokens=64, generate=max_tokens - 1,
                                    first_position=1, seed=3))
    relayed = ledger.add(rid, handle, first, max_tokens, cap)

    async def consume():  # what the relay's Generate stream does
        async for event in handle.events():
            if isinstance(event, FinishedEvent):
                return
            if relayed.cut is not None and event.position >= relayed.cut:
                return
            relayed.produced(event.position, event.token_id)

    return relayed, asyncio.create_task(consume()), ids


async def test_relay_pauses_at_its_cap(make_engine):
    ledger = RelayLedger()
    relayed, consumer, ids = await _relay(make_engine, ledger, "r1", max_tokens=100, cap=10)
    ids_so_far, end, stopped, finished = await ledger.handoff("r1", 0, stop=False)
    while len(relayed.ids) < 10:
        await asyncio.wait_for(relayed.changed.wait(), 5)
        relayed.changed.clear()
    assert relayed.handle.next_position == 10  # held at the cap, nothing beyond it
    got, end, stopped, finished = await ledger.handoff("r1", 0, stop=True)
    assert (end, stopped, finished) == (10, True, False)
    fp = prompt_fingerprint(ids)
    assert got == [output_token(fp, i, 3, VOCAB) for i in range(10)]
    await asyncio.wait_for(consumer, 5)


async def test_stop_cuts_at_most_one_step_ahead_and_releases(make_engine):
    ledger = RelayLedger()
    relayed, consumer, ids = await _relay(make_engine, ledger, "r2", max_tokens=400, cap=400)
    while len(relayed.ids) < 5:
        await asyncio.wait_for(relayed.changed.wait(), 5)
        relayed.changed.clear()
    before = relayed.handle.next_position
    got, end, stopped, finished = await ledger.handoff("r2", 2, stop=True)
    assert before <= end <= before + 1 and stopped and not finished
    assert len(got) == end - 2  # from position 2 to the cut
    await asyncio.wait_for(consumer, 5)
    assert relayed.handle.status.value == "cancelled"  # blocks freed at once
    assert len(relayed.ids) == end


async def test_stop_when_stops_only_when_its_rule_holds_for_the_backlog(make_engine):
    ledger = RelayLedger()
    relayed, consumer, ids = await _relay(make_engine, ledger, "r5", max_tokens=400, cap=400)
    while len(relayed.ids) < 8:
        await asyncio.wait_for(relayed.changed.wait(), 5)
        relayed.changed.clear()
    loads = []
    got, end, stopped, finished = await ledger.handoff("r5", 0, stop=False, stop_when=StopWhen(2, load_at_least=0.5),
                                                       load=lambda: loads.append(1) or 0.1)
    assert not stopped and relayed.cut is None and len(got) == end >= 8  # a backlog to catch up, room on the relay
    assert loads == [1]
    busy_load = 0.5
    got, end, stopped, finished = await ledger.handoff("r5", 0, stop=False, stop_when=StopWhen(2, load_at_least=0.5),
                                                       load=lambda: busy_load)
    assert stopped and relayed.cut == end and len(got) == end  # a busy relay stops at once, as with stop
    await asyncio.wait_for(consumer, 5)
    assert relayed.handle.status.value == "cancelled"


async def test_stop_when_stops_at_a_backlog_bound(make_engine):
    ledger = RelayLedger()
    relayed, consumer, ids = await _relay(make_engine, ledger, "r6", max_tokens=400, cap=400)
    while len(relayed.ids) < 8:
        await asyncio.wait_for(relayed.changed.wait(), 5)
        relayed.changed.clear()
    held = len(relayed.ids)
    _, _, stopped, _ = await ledger.handoff("r6", held - 3, stop=False, stop_when=StopWhen(2, backlog_at_least=4))
    assert not stopped  # a backlog of 3: neither within 2 nor at least 4
    _, end, stopped, _ = await ledger.handoff("r6", held - 3, stop=False, stop_when=StopWhen(2, backlog_at_least=3))
    assert stopped and end >= held
    await asyncio.wait_for(consumer, 5)


async def test_request_shorter_than_the_cap_finishes_on_the_relay(make_engine):
    ledger = RelayLedger()
    relayed, consumer, _ = await _relay(make_engine, ledger, "r3", max_tokens=4, cap=64)
    await asyncio.wait_for(consumer, 5)
    got, end, stopped, finished = await ledger.handoff("r3", 0, stop=True)
    assert finished and end == 4 and len(got) == 4


async def test_unknown_request_is_a_key_error():
    with pytest.raises(KeyError):
        await RelayLedger().handoff("nope", 0, stop=True)


async def test_a_forwarding_sink_keeps_the_ledger_and_stops_at_the_cut(make_engine):
    """Tokens handed out as each step ends are recorded once, in order; none at or past the cut."""
    ledger = RelayLedger()
    engine = await make_engine(RecordingClock(per_step_s=0.002))
    ids = prompt(64)
    first = output_token(prompt_fingerprint(ids), 0, 3, VOCAB)
    handle = engine.submit(Sequence("f", ids + [first], prompt_len=64, kv_tokens=64, generate=39, first_position=1,
                                    seed=3))
    relayed = ledger.add("f", handle, first, 40, 0)
    sent: list[int] = []

    def feed(event) -> bool:
        sent.append(event.position)
        return True

    handle.forward(relayed.forwarding(feed))
    while len(relayed.ids) < 5:
        await asyncio.wait_for(relayed.changed.wait(), 10)
        relayed.changed.clear()
    got, end, stopped, finished = await asyncio.wait_for(ledger.handoff("f", 0, stop=True), 10)
    assert stopped and not finished and got == relayed.ids[:end] and len(got) == end
    assert sent == list(range(1, end))  # position 0 came with the KV; each later one exactly once
    take = relayed.forwarding(feed)
    assert not take(TokenEvent(end, 1, 0.0)) and not take(TokenEvent(3, 1, 0.0))  # past the cut; out of order
