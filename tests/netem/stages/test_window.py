import pytest

from netem.config import DirectionConfig
from netem.stages.base import Chunk
from netem.stages.window import Window


def make(rtt: float, **fields) -> Window:
    w = Window()
    w.configure(DirectionConfig(**fields), rtt=rtt)
    return w


def send(w: Window, size: int, at: float) -> float:
    c = Chunk(None, size, at, at)
    w.pipe(c)
    return c.deadline


def test_off_by_default():
    w = make(0.1)
    assert not w.active
    assert send(w, 10**9, 1.0) == 1.0


def test_window_cap_limits_one_flow_to_window_per_rtt():
    w = make(0.1, window="64KiB")
    # 1 MiB with 64 KiB per 100 ms round: the last byte goes in round 16 -> 1.5 s after start.
    last = 0.0
    for _ in range(16):
        last = send(w, 64 * 1024, 0.0)
    assert last == pytest.approx(1.5)


def test_slow_start_doubles_per_round_from_initial_window():
    w = make(0.1, slow_start=True, initial_window=10_000)
    # rounds carry 10k, 20k, 40k, 80k: 150k bytes need four rounds.
    assert send(w, 150_000, 0.0) == pytest.approx(0.3)


def test_slow_start_restarts_after_an_idle_rto():
    w = make(0.1, slow_start=True, initial_window=10_000)
    send(w, 150_000, 0.0)  # window grew to 80k
    assert send(w, 80_000, 0.45) == pytest.approx(0.45)  # still warm: a fresh round fits 80k at once
    # idle longer than max(200 ms, rtt): back to 10k, so 30k needs a second round.
    assert send(w, 30_000, 2.0) == pytest.approx(2.1)


def test_zero_rtt_disables_the_window():
    w = make(0.0, window="1KiB")
    assert send(w, 10**6, 5.0) == 5.0
