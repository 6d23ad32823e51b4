"""The fault soak's schedule and its RSS check, without a mesh."""

from __future__ import annotations

import random

from services.chaos.faults import Window
from services.chaos.rotation import FULL_SLOTS, QUICK_SLOTS, rss_bounded, slots


def test_every_slot_strikes_the_next_fault_and_pd_cross_has_no_relay_to_kill():
    pdd = [s.name for s in slots(False, "pdd", random.Random(0))]
    assert len(pdd) == FULL_SLOTS and len(slots(True, "pdd", random.Random(0))) == QUICK_SLOTS
    assert pdd[:7] == ["00-kill-main-decode", "01-blackhole-5s", "02-kill-prefill", "03-reject-5s",
                       "04-jitter", "05-kill-relay-decode", "06-kill-main-decode"]
    assert not any("relay" in s.name for s in slots(False, "pd-cross", random.Random(0)))


def _windows(main_decode_kib: list[int]) -> list[Window]:
    return [Window(f"{i:02d}", i * 60.0, i * 60.0 + 5, {"rss_kib": {"main-decode": kib, "gone": None}})
            for i, kib in enumerate(main_decode_kib)]


def test_rss_growth_after_the_warm_up_share_is_bounded():
    assert rss_bounded(_windows([100_000] * 5 + [120_000] * 5), {}) == []
    grew = rss_bounded(_windows([100_000, 100_000, 110_000] + [200_000] * 7), {})
    assert len(grew) == 1 and grew[0].startswith("main-decode grew 90000 KiB")
