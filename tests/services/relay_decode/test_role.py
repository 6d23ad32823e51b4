"""The relay core's calls driven directly: its ledger, a fake KV shipper, no grpc context."""

from __future__ import annotations

import pytest

from services.relay_decode.relay import RelayedRequest, RelayLedger
from services.relay_decode.role import RelayDecodeRole
from services.types import ErrorKind, RoleError


class FakeHandle:
    """The parts of a SequenceHandle the ledger moves: one token in flight, its limit, its release."""

    def __init__(self, next_position: int) -> None:
        self.next_position, self.limits, self.cancelled = next_position, [], False

    def set_limit(self, limit: int | None) -> None:
        self.limits.append(limit)

    def cancel(self) -> None:
        self.cancelled = True


class FakeShipper:
    def __init__(self, refuse: bool = False) -> None:
        self.refuse, self.shipped = refuse, []

    async def ship(self, transfer_id: str, target: str, tokens: int, **kwargs):
        if self.refuse:
            raise KeyError(f"no link from relay-decode to {target!r}")
        self.shipped.append((transfer_id, target, tokens))


def _relay(shipper: FakeShipper, ids: list[int], end_position: int) -> tuple[RelayDecodeRole, FakeHandle]:
    ledger, handle = RelayLedger(), FakeHandle(next_position=len(ids) - 1)
    ledger.requests["r"] = RelayedRequest(handle, end_position, list(ids))
    return RelayDecodeRole(ledger, shipper, load=lambda: 0.25, settle_timeout_s=1.0), handle


async def test_a_stopping_handoff_cuts_releases_and_ships_the_relays_kv():
    shipper = FakeShipper()
    role, handle = _relay(shipper, [7, 8, 9], end_position=10)
    reply = await role.handoff("r", 1, stop=True, ship_kv_to="main-decode")
    assert list(reply.tokens) == [8, 9] and reply.end_position == 3 and reply.stopped and not reply.finished
    assert reply.relay_load == 0.25 and handle.limits == [3] and handle.cancelled
    assert shipper.shipped == [("r/handoff", "main-decode", 2)]  # every relay token's KV but the last
    assert role.ledger.handoffs == 1


async def test_a_finished_request_ships_nothing():
    shipper = FakeShipper()
    role, handle = _relay(shipper, [7, 8, 9], end_position=3)
    reply = await role.handoff("r", 0, stop=True, ship_kv_to="main-decode")
    assert reply.finished and list(reply.tokens) == [7, 8, 9] and shipper.shipped == [] and not handle.cancelled


async def test_failures_are_role_errors_of_their_kind():
    role, handle = _relay(FakeShipper(refuse=True), [7, 8], end_position=10)
    with pytest.raises(RoleError) as unknown:
        await role.handoff("nope", 0, stop=False)
    assert unknown.value.kind is ErrorKind.NOT_FOUND and unknown.value.message == "nope is not relayed here"
    with pytest.raises(RoleError) as no_limit:
        await role.set_limit("nope", None)
    assert no_limit.value.kind is ErrorKind.NOT_FOUND
    with pytest.raises(RoleError) as refused:
        await role.handoff("r", 0, stop=True, ship_kv_to="main-decode")
    assert refused.value.kind is ErrorKind.UNAVAILABLE and "shipping the relay's KV failed" in refused.value.message


async def test_set_limit_moves_the_cap_until_a_cut():
    role, handle = _relay(FakeShipper(), [7, 8], end_position=10)
    await role.set_limit("r", None)
    assert handle.limits == [None] and role.ledger.requests["r"].limit is None
