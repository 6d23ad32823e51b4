import pytest

from netem.config import DirectionConfig
from netem.stages.base import Chunk
from netem.stages.serialize import HORIZON, MIN_PIECE_BYTES, Line, piece_bytes
from netem.timers import LoopTimers
from tests.netem.fakes import FakeLoop


def make(rate: str | None, loop: FakeLoop) -> tuple[Line, list[tuple[float, Chunk]]]:
    line = Line()
    line.bind(loop.time, LoopTimers(loop, lead=0.0))  # type: ignore[arg-type]
    line.configure(DirectionConfig(rate=rate), rtt=0.0)
    out: list[tuple[float, Chunk]] = []
    return line, out


def send(line: Line, out: list, loop: FakeLoop, size: int) -> Chunk:
    chunk = Chunk(None, size, loop.now, loop.now)
    line.enqueue(chunk, lambda c: out.append((loop.now, c)))
    return chunk


def test_idle_line_finishes_after_one_serialization_time():
    loop = FakeLoop(10.0)
    line, out = make("8mbit", loop)  # 1 MB/s
    chunk = send(line, out, loop, 1000)
    assert chunk.deadline == pytest.approx(10.0 + 1000 / 1e6)
    assert out == [(10.0, chunk)]


def test_busy_line_queues_back_to_back_from_the_previous_finish_not_from_now():
    loop = FakeLoop(0.0)
    line, out = make("8mbit", loop)
    a = send(line, out, loop, 500_000)  # busy until 0.5
    loop.advance_to(0.1)
    b = send(line, out, loop, 500_000)  # waits for the line: stamped later, finish 1.0 not 0.6
    assert len(out) == 1
    loop.advance_to(0.5 - HORIZON, lateness=0.003)  # a late line timer does not shift the finish
    assert a.deadline == pytest.approx(0.5)
    assert b.deadline == pytest.approx(1.0)


def test_line_goes_idle_between_sparse_chunks():
    loop = FakeLoop(0.0)
    line, out = make("8mbit", loop)
    send(line, out, loop, 1000)
    loop.advance_to(5.0)
    late = send(line, out, loop, 1000)
    assert late.deadline == pytest.approx(5.001)
    assert line.backlog(5.0) == pytest.approx(0.001)


def test_unlimited_rate_leaves_deadline_alone():
    loop = FakeLoop(3.0)
    line, out = make(None, loop)
    assert send(line, out, loop, 10**9).deadline == 3.0


def test_a_rate_change_acts_on_the_waiting_backlog():
    loop = FakeLoop(0.0)
    line, out = make("8mbit", loop)
    send(line, out, loop, 1_000_000)  # on the line until 1.0 at the old rate
    waiting = send(line, out, loop, 1_000_000)
    assert line.backlog(0.0) == pytest.approx(2.0)
    line.configure(DirectionConfig(rate="16mbit"), rtt=0.0)  # the waiting chunk has not started
    loop.advance_to(2.0)
    assert waiting.deadline == pytest.approx(1.0 + 0.5)


def test_forgotten_chunks_leave_the_line():
    loop = FakeLoop(0.0)
    line, out = make("8mbit", loop)
    send(line, out, loop, 1_000_000)
    owner = out.append
    line.enqueue(Chunk(None, 1000, 0.0, 0.0), owner)
    line.forget(owner)
    assert line.waiting_bytes == 0
    loop.advance_to(5.0)
    assert len(out) == 1


def test_pieces_are_about_two_ms_of_line_time_with_a_floor():
    assert piece_bytes(None) is None
    assert piece_bytes(8e8) == 200_000
    assert piece_bytes(1e6) == MIN_PIECE_BYTES


def test_chunks_queued_behind_a_waiting_head_keep_its_timer():
    loop = FakeLoop(0.0)
    line, out = make("8mbit", loop)
    send(line, out, loop, 1_000_000)  # on the line until 1.0
    heads = [send(line, out, loop, 1000)]
    armed = len(loop._timers)
    heads += [send(line, out, loop, 1000) for _ in range(50)]  # the head, and so its start, is unchanged
    assert len(loop._timers) == armed and loop.pending() == [1.0 - HORIZON]
    loop.advance_to(2.0)
    assert [c.deadline for c in heads] == pytest.approx([1.0 + (i + 1) * 0.001 for i in range(51)])
