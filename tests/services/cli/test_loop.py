"""The event loop a mesh process runs on: uvloop for the router, asyncio where timers emulate time."""

from __future__ import annotations

import asyncio

import pytest
import uvloop

from services.cli.loop import ENV, run


async def _loop_type() -> type:
    return type(asyncio.get_running_loop())


def test_by_default_only_a_process_without_emulated_timers_gets_uvloop(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert issubclass(run(_loop_type(), keeps_time=False), uvloop.Loop)
    assert not issubclass(run(_loop_type(), keeps_time=True), uvloop.Loop)


@pytest.mark.parametrize("choice, is_uvloop", [("asyncio", False), ("uvloop", True)])
def test_the_variable_sets_every_process(monkeypatch, choice, is_uvloop):
    monkeypatch.setenv(ENV, choice)
    for keeps_time in (True, False):
        assert issubclass(run(_loop_type(), keeps_time=keeps_time), uvloop.Loop) is is_uvloop


def test_an_unknown_loop_is_refused_with_the_choices(monkeypatch):
    monkeypatch.setenv(ENV, "tornado")
    coroutine = _loop_type()
    with pytest.raises(ValueError, match="auto, uvloop, asyncio"):
        run(coroutine)
    coroutine.close()
