import random

import pytest

from netem.config import DirectionConfig
from netem.stages.base import Chunk
from netem.stages.latency import Latency


def test_delay_is_added_to_the_stamp():
    lat = Latency(random.Random(1))
    lat.configure(DirectionConfig(delay="20ms"), rtt=0.0)
    c = Chunk(None, 10, 100.0, 100.5)
    lat.pipe(c)
    assert c.deadline == pytest.approx(100.52)


def test_jitter_never_makes_a_chunk_leave_before_it_entered():
    lat = Latency(random.Random(2))
    lat.configure(DirectionConfig(delay="1ms", jitter="10ms", jitter_dist="normal"), rtt=0.0)
    for _ in range(2000):
        c = Chunk(None, 1, 50.0, 50.0)
        lat.pipe(c)
        assert c.deadline >= 50.0


def test_same_seed_same_delays_different_seed_different_delays():
    def draws(seed: int) -> list[float]:
        lat = Latency(random.Random(seed))
        lat.configure(DirectionConfig(delay="10ms", jitter="2ms", jitter_dist="pareto"), rtt=0.0)
        out = []
        for _ in range(50):
            c = Chunk(None, 1, 0.0, 0.0)
            lat.pipe(c)
            out.append(c.deadline)
        return out

    assert draws(7) == draws(7)
    assert draws(7) != draws(8)
