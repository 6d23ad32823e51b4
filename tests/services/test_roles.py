"""Each role core offers its Protocol's calls, with the Protocol's parameters: a core is its own in-process peer."""

from __future__ import annotations

import inspect

import pytest

from services.main_decode.relay_peer import GrpcRelayPeer
from services.main_decode.role import MainDecodeRole
from services.prefill.role import PrefillRole
from services.relay_decode.role import RelayDecodeRole
from services.roles import DecodePeer, PrefillPeer, RelayPeer


def _calls(protocol: type) -> dict[str, inspect.Signature]:
    return {name: inspect.signature(member) for name, member in vars(protocol).items()
            if not name.startswith("_") and callable(member)}


@pytest.mark.parametrize("protocol,implementation", [
    (PrefillPeer, PrefillRole), (DecodePeer, MainDecodeRole), (RelayPeer, RelayDecodeRole), (RelayPeer, GrpcRelayPeer),
])
def test_the_implementation_offers_every_call_of_its_protocol(protocol, implementation):
    calls = _calls(protocol)
    assert calls  # a Protocol with no calls would pass vacuously
    for name, signature in calls.items():
        member = getattr(implementation, name, None)
        assert member is not None, f"{implementation.__name__} lacks {name}"
        assert list(inspect.signature(member).parameters) == list(signature.parameters), name
        assert inspect.iscoroutinefunction(member) == inspect.iscoroutinefunction(vars(protocol)[name]), name
        if name == "generate":  # a stream: an async generator, as the Protocol's AsyncIterator says
            assert inspect.isasyncgenfunction(member)
