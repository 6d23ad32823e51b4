"""The decode core driven directly: a fake relay peer and clock, the KV announced in the table, no grpc."""

from __future__ import annotations

import itertools

import pytest

from services.engine.sequence import TokenEvent
from services.engine.tokens import output_token, prompt_fingerprint
from services.kv.transfers import TransferTable
from services.main_decode.role import MainDecodeRole
from services.relay_decode.relay import RelayLedger, StopWhen
from services.rpc import pb
from services.rpc.ids import pack_ids
from services.types import ErrorKind, RoleError
from tests.services.engine.conftest import prompt
from tests.services.role_process import running_process

SEED, OUTPUT = 3, 8


class FakeRelay:
    """A RelayPeer that produced `ids` (positions 0..) and stops there, by the call's stop or stop_when as the
    relay's ledger does; or one that fails with `error`."""

    def __init__(self, ids: list[int], finished: bool = False, error: RoleError | None = None) -> None:
        self.ids, self.finished, self.error, self.calls = ids, finished, error, []

    async def handoff(self, request_id: str, from_position: int, stop: bool, ship_kv_to: str = "",
                      stop_when: StopWhen | None = None):
        if self.error is not None:
            raise self.error
        stop = stop or stop_when is not None and stop_when.holds(len(self.ids) - from_position, lambda: 0.0)
        self.calls.append((request_id, from_position, stop))
        return pb.HandoffReply(tokens=self.ids[from_position:], end_position=len(self.ids), stopped=stop,
                               finished=self.finished, relay_load=0.0)

    async def set_limit(self, request_id: str, limit: int | None) -> None:
        raise AssertionError("main decode never moves the relay's cap")


@pytest.fixture
async def main_decode():
    async with running_process("pdd-mini", "main-decode") as process:
        yield process


def _expected(ids: list[int], vocab: int) -> list[int]:
    return [output_token(prompt_fingerprint(ids), i, SEED, vocab) for i in range(OUTPUT)]


async def _generate(role: MainDecodeRole, ids: list[int], first: int) -> list:
    """The events of a handed-off request whose prompt KV has landed."""
    role.transfers.announce("r", 0, 0, 0, first, len(ids))  # no frames: the transfer is whole at once
    request = pb.GenerateRequest(request_id="r", prompt_ids=pack_ids(ids), max_tokens=OUTPUT, seed=SEED,
                                 expect_transfer=True, handoff_from="relay-decode")
    return [event async for event in role.generate(request)]


async def test_main_decode_continues_from_the_relays_cut_with_the_clock_it_was_given(main_decode):
    ids = prompt(64)
    expected = _expected(ids, main_decode.engines[0].config.vocab_size)
    relay = FakeRelay(expected[:3])
    clock = itertools.count(1000.0, 0.5).__next__  # the take-over's start, then its first token
    role = MainDecodeRole(main_decode, TransferTable(), RelayLedger(), {"relay-decode": relay}.__getitem__, clock)
    *tokens, end = await _generate(role, ids, expected[0])
    assert [(t.position, t.token_id) for t in tokens] == list(enumerate(expected))[3:]  # nothing lost or repeated
    assert relay.calls == [("r", 0, True)]  # one-shot, in one call: the backlog is under the threshold
    stats = end.stats
    assert stats.handoff_mode == "one-shot" and stats.handed_off_at == 3 and not stats.finished_on_relay
    assert stats.handoff_started_unix == 1000.0 and stats.handoff_stall_s == 0.5
    assert role.handoffs == {"one-shot": 1, "catch-up": 0}


async def test_a_request_the_relay_finished_ends_with_its_stats_alone(main_decode):
    ids = prompt(64)
    expected = _expected(ids, main_decode.engines[0].config.vocab_size)
    role = MainDecodeRole(main_decode, TransferTable(), RelayLedger(), lambda name: FakeRelay(expected, True))
    (end,) = await _generate(role, ids, expected[0])
    assert end.stats.finished_on_relay and end.stats.handed_off_at == OUTPUT


async def test_a_relay_that_never_had_the_request_leaves_main_decode_to_decode_it_whole(main_decode):
    ids = prompt(64)
    expected = _expected(ids, main_decode.engines[0].config.vocab_size)
    missing = FakeRelay([], error=RoleError(ErrorKind.NOT_FOUND, "r is not relayed here"))
    role = MainDecodeRole(main_decode, TransferTable(), RelayLedger(), lambda name: missing)
    *tokens, end = await _generate(role, ids, expected[0])
    assert all(type(t) is TokenEvent for t in tokens) and [t.token_id for t in tokens] == expected
    assert role.relay_missing == 1 and end.stats.handed_off_at == 0


async def test_a_failed_handoff_is_an_unavailable_role_error_naming_the_relay(main_decode):
    failing = FakeRelay([], error=RoleError(ErrorKind.DEADLINE, "r: relay did not reach its cut"))
    role = MainDecodeRole(main_decode, TransferTable(), RelayLedger(), lambda name: failing)
    with pytest.raises(RoleError) as failed:
        await _generate(role, prompt(64), 1)
    assert failed.value.kind is ErrorKind.UNAVAILABLE
    assert failed.value.message == "handoff from relay-decode failed: r: relay did not reach its cut"


async def test_refusals_are_role_errors_of_their_kind(main_decode):
    role = MainDecodeRole(main_decode, TransferTable(), RelayLedger(), lambda name: FakeRelay([]))
    empty = pb.GenerateRequest(request_id="e", prompt_ids=pack_ids([]), max_tokens=4)
    with pytest.raises(RoleError) as invalid:
        [event async for event in role.generate(empty)]
    assert invalid.value.kind is ErrorKind.INVALID
    main_decode.draining = True
    assert not (await role.announce(pb.TransferAnnounce(request_id="d", frames=1))).accepted
    with pytest.raises(RoleError) as draining:
        [event async for event in role.generate(pb.GenerateRequest(request_id="d", prompt_ids=pack_ids(prompt(8)),
                                                                     max_tokens=4))]
    assert draining.value.kind is ErrorKind.UNAVAILABLE and "draining" in draining.value.message
