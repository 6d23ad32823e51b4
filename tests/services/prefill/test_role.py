"""The prefill core driven directly: a fake KV shipper and clock, no grpc context, no sockets."""

from __future__ import annotations

import pytest

from services.engine.tokens import output_token, prompt_fingerprint
from services.kv.frames import Completion
from services.kv.shipper import Shipment
from services.kv.stream import KvProgress
from services.prefill.role import PrefillRole
from services.rpc import pb
from services.rpc.ids import pack_ids
from services.types import ErrorKind, RoleError
from tests.services.engine.conftest import prompt
from tests.services.role_process import running_process

SEED = 5


class FakeShipper:
    """Opens each transfer (but fails `refuse`'s, as a sender that cannot start), records what each
    stream's progress ended with (the completion its last frame carries) and abandons."""

    def __init__(self, refuse: str = "") -> None:
        self.refuse, self.opened, self.abandoned = refuse, [], []
        self.progress: dict[str, KvProgress] = {}

    async def ship(self, transfer_id: str, target: str, tokens: int, first_index: int = 0,
                   progress: KvProgress | None = None, **kwargs) -> Shipment:
        if target == self.refuse:
            raise ConnectionError(f"no connection to {target} for the KV of {transfer_id}")
        self.opened.append((target, tokens, first_index))
        self.progress[target] = progress
        return Shipment(target, tokens, emulated_bytes=1000 * tokens, real_bytes=tokens)

    @property
    def confirmed(self) -> list[tuple[str, Completion]]:
        return [(target, p.completion) for target, p in self.progress.items() if p.completion is not None]

    async def abandon(self, shipment: Shipment, reason: str) -> None:
        self.abandoned.append((shipment.target, reason))


@pytest.fixture
async def prefill():
    async with running_process("pdd-mini", "prefill") as process:
        yield process


def _request(ids: list[int], **targets) -> pb.PrefillRequest:
    return pb.PrefillRequest(request_id="r", prompt_ids=pack_ids(ids), seed=SEED, **targets)


async def test_dual_path_prefill_ships_both_and_reports_on_the_clock_it_was_given(prefill):
    ids, shipper = prompt(256), FakeShipper()
    role = PrefillRole(prefill, shipper, clock=lambda: 42.0)
    reply = await role.prefill(_request(ids, kv_target="main-decode", receiver_hit_tokens=64,
                                        kv_target_secondary="relay-decode"))
    first = output_token(prompt_fingerprint(ids), 0, SEED, prefill.engines[0].config.vocab_size)
    assert reply.first_token == first and reply.prefill_done_unix == 42.0
    assert shipper.opened == [("main-decode", 192, 64), ("relay-decode", 256, 0)]  # what each receiver lacks
    done = Completion(first, 42.0)  # the first token, and prefill's end on the role's clock
    assert sorted(shipper.confirmed) == [("main-decode", done), ("relay-decode", done)]
    assert reply.kv_bytes_emulated == 192_000 and reply.kv_bytes_emulated_secondary == 256_000


async def test_a_transfer_that_cannot_start_stops_prefill_and_the_other_receiver_is_told(prefill):
    shipper = FakeShipper(refuse="relay-decode")
    role = PrefillRole(prefill, shipper)
    with pytest.raises(ConnectionError, match="no connection to relay-decode"):
        await role.prefill(_request(prompt(256), kv_target="main-decode", kv_target_secondary="relay-decode"))
    assert [target for target, reason in shipper.abandoned] == ["main-decode"] and not shipper.confirmed
    assert sum(engine.stats().requests_cancelled for engine in prefill.engines) == 1  # its prefill stopped


async def test_calls_the_core_cannot_serve_are_invalid(prefill):
    role = PrefillRole(prefill, FakeShipper())
    with pytest.raises(RoleError) as no_link:
        await role.prefill(_request(prompt(64), kv_target="nowhere"))
    assert no_link.value.kind is ErrorKind.INVALID and "no link from prefill to 'nowhere'" in no_link.value.message
    with pytest.raises(RoleError) as empty:
        await role.prefill(_request([], kv_target="main-decode"))
    assert empty.value.kind is ErrorKind.INVALID
