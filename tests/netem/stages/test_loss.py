import random

import pytest

from netem.config import DirectionConfig
from netem.stages.base import Chunk
from netem.stages.loss import LossStall


def make(seed: int = 1, **fields) -> LossStall:
    loss = LossStall(random.Random(seed))
    loss.configure(DirectionConfig(**fields), rtt=0.0)
    return loss


def feed(loss: LossStall, sizes: list[int]) -> float:
    total = 0.0
    for size in sizes:
        c = Chunk(None, size, 0.0, 0.0)
        loss.pipe(c)
        total += c.deadline
    return total


def test_no_loss_no_stall():
    assert feed(make(loss=0), [10**6] * 10) == 0.0


def test_every_unit_lost_costs_one_stall_each():
    loss = make(loss=1.0, loss_unit=1000, loss_stall="100ms")
    c = Chunk(None, 5000, 0.0, 0.0)
    loss.pipe(c)
    assert c.deadline == pytest.approx(0.5)
    assert loss.stalls == 5


def test_stall_count_matches_probability_per_unit():
    loss = make(seed=4, loss="1%", loss_unit=1448, loss_stall="200ms")
    units = 200_000
    feed(loss, [1448 * 100] * (units // 100))
    expected = units * 0.01
    assert abs(loss.stalls - expected) < 4 * expected**0.5  # within 4 sigma of the binomial mean


def test_losses_depend_on_byte_positions_not_on_read_sizes():
    a = make(seed=11, loss="0.5%")
    b = make(seed=11, loss="0.5%")
    feed(a, [1448 * 1000])
    feed(b, [1448 * 10] * 100)
    assert a.stalls == b.stalls > 0


def test_loss_per_megabyte_unit():
    loss = make(seed=2, loss="10%", loss_unit="1MiB", loss_stall="1s")
    feed(loss, [2**20] * 1000)
    assert 60 < loss.stalls < 140
