import pytest

from netem.config import DirectionConfig
from netem.stages.base import Chunk
from netem.stages.serialize import MIN_PIECE_BYTES, Serializer, piece_bytes


def stamped(size: int, entry: float) -> Chunk:
    return Chunk(None, size, entry, entry)


def make(rate: str | None) -> Serializer:
    s = Serializer()
    s.configure(DirectionConfig(rate=rate), rtt=0.0)
    return s


def test_idle_line_finishes_after_one_serialization_time():
    s = make("8mbit")  # 1 MB/s
    chunk = s_pipe(s, 1000, entry=10.0)
    assert chunk.deadline == pytest.approx(10.0 + 1000 / 1e6)


def s_pipe(s: Serializer, size: int, entry: float) -> Chunk:
    c = stamped(size, entry)
    s.pipe(c)
    return c


def test_busy_line_queues_back_to_back_from_entry_not_from_now():
    s = make("8mbit")
    a = s_pipe(s, 500_000, entry=0.0)  # busy until 0.5
    b = s_pipe(s, 500_000, entry=0.1)  # waits for the line, not 0.1 + 0.5
    assert a.deadline == pytest.approx(0.5)
    assert b.deadline == pytest.approx(1.0)


def test_line_goes_idle_between_sparse_chunks():
    s = make("8mbit")
    s_pipe(s, 1000, entry=0.0)
    late = s_pipe(s, 1000, entry=5.0)
    assert late.deadline == pytest.approx(5.001)
    assert s.backlog(5.0) == pytest.approx(0.001)


def test_unlimited_rate_leaves_deadline_alone():
    s = make(None)
    assert s_pipe(s, 10**9, entry=3.0).deadline == 3.0


def test_rate_change_keeps_promised_line_time():
    s = make("8mbit")
    s_pipe(s, 1_000_000, entry=0.0)  # line busy until 1.0 at the old rate
    s.configure(DirectionConfig(rate="16mbit"), rtt=0.0)
    nxt = s_pipe(s, 1_000_000, entry=0.0)
    assert nxt.deadline == pytest.approx(1.0 + 0.5)


def test_pieces_are_about_two_ms_of_line_time_with_a_floor():
    assert piece_bytes(None) is None
    assert piece_bytes(8e8) == 200_000
    assert piece_bytes(1e6) == MIN_PIECE_BYTES
