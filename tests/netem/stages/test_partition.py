import math

from netem.stages.partition import Partition


def test_blackhole_holds_until_its_end_then_heals_itself():
    p = Partition()
    p.start("blackhole", now=10.0, duration=2.0)
    assert p.held_until(11.0) == 12.0
    assert p.remaining(11.5) == 0.5
    assert p.held_until(12.0) is None
    assert p.mode is None


def test_without_duration_it_lasts_until_healed():
    p = Partition()
    p.start("blackhole", now=0.0, duration=None)
    assert p.held_until(1e6) == math.inf
    p.heal()
    assert p.held_until(1e6) is None


def test_reject_does_not_hold_bytes():
    p = Partition()
    p.start("reject", now=0.0, duration=5.0)
    assert p.active(1.0) == "reject"
    assert p.held_until(1.0) is None
