"""Main decode's catch-up handoff against a relay that keeps generating between pulls."""

from __future__ import annotations

from types import SimpleNamespace

from services.engine.scheduler import Engine, EngineConfig
from services.main_decode.handoff import take_over
from services.relay_decode.relay import StopWhen
from services.rpc import pb
from services.scenario import PddSpec
from services.types import HandoffMode
from tests.services.engine.conftest import VOCAB, RecordingClock, prompt


class RunningRelay:
    """A RelayPeer that has produced `start` ids and makes `per_pull` more before every later pull; it
    stops by the call's stop or stop_when, as the relay's ledger does."""

    def __init__(self, start: int, per_pull: int, load: float = 0.1) -> None:
        self.produced, self.per_pull, self.pulls, self.stopped_at, self.load = start, per_pull, 0, None, load

    async def handoff(self, request_id: str, from_position: int, stop: bool, ship_kv_to: str = "",
                      stop_when: StopWhen | None = None):
        if self.pulls:
            self.produced += self.per_pull
        self.pulls += 1
        stop = stop or stop_when is not None and stop_when.holds(self.produced - from_position, lambda: self.load)
        if stop:
            self.stopped_at = self.produced
        ids = [(7 * i) % VOCAB for i in range(from_position, self.produced)]
        return pb.HandoffReply(tokens=ids, end_position=self.produced, stopped=stop, finished=False,
                               relay_load=self.load)

    async def set_limit(self, request_id: str, limit: int | None) -> None:
        raise AssertionError("take_over never moves the relay's cap")


async def test_catch_up_ends_when_the_backlog_stops_shrinking():
    engine = Engine(EngineConfig(kv_capacity_blocks=4096, vocab_size=VOCAB), RecordingClock(per_step_s=0.001))
    await engine.start()
    try:
        relay = RunningRelay(start=100, per_pull=5)  # every round leaves 5 new tokens: never within 2
        request = SimpleNamespace(request_id="r", max_tokens=600, seed=0)
        spec = PddSpec(catch_up_threshold=64, busy_relay_load=0.5)
        outcome = await take_over(relay, engine, request, prompt(256), spec)
        assert outcome.mode is HandoffMode.CATCH_UP
        assert relay.pulls <= 4 and outcome.cut == relay.stopped_at < 130  # the relay did not run on to its cap
        assert relay.pulls == outcome.chunks  # every pull brought a chunk: stopping cost no call of its own
        outcome.handle.cancel()
    finally:
        await engine.stop()


async def _take_over(relay: RunningRelay):
    engine = Engine(EngineConfig(kv_capacity_blocks=4096, vocab_size=VOCAB), RecordingClock(per_step_s=0.001))
    await engine.start()
    try:
        spec = PddSpec(catch_up_threshold=64, busy_relay_load=0.5)
        outcome = await take_over(relay, engine, SimpleNamespace(request_id="r", max_tokens=600, seed=0), prompt(256),
                                  spec)
        outcome.handle.cancel()
        return outcome
    finally:
        await engine.stop()


async def test_a_one_shot_handoff_is_one_call():
    small = RunningRelay(start=40, per_pull=5)  # a backlog within the threshold
    outcome = await _take_over(small)
    assert outcome.mode is HandoffMode.ONE_SHOT and small.pulls == 1 and outcome.cut == small.stopped_at == 40
    busy = RunningRelay(start=100, per_pull=5, load=0.6)  # a backlog to catch up, on a busy relay
    outcome = await _take_over(busy)
    assert outcome.mode is HandoffMode.ONE_SHOT and busy.pulls == 1 and outcome.cut == busy.stopped_at == 100
