"""The mesh backend's reduction of /stats snapshots to the validity inputs of a window."""

from __future__ import annotations

import pytest

from services.experiments.economics.window import window_stats
from services.scenario import load_scenario


def _engine(busy=0.0, steps=0, decode=0, query=0, hit=0, host=0, used=0, total=100, waiting=0) -> dict:
    return {"busy_seconds": busy, "steps": steps, "decode_tokens": decode, "prefix_cache_query_tokens": query,
            "prefix_cache_hit_tokens": hit, "host_cache_hit_tokens": host, "kv_blocks_used": used,
            "kv_blocks_total": total, "waiting": waiting}


def _snapshot(prefill: list[dict], decode: list[dict], relay: list[dict]) -> dict:
    return {"prefill": {"role": "prefill", "instances": {f"p{i}": e for i, e in enumerate(prefill)}},
            "main-decode": {"role": "main-decode", "instances": {f"m{i}": e for i, e in enumerate(decode)}},
            "relay-decode": {"role": "relay-decode", "instances": {f"r{i}": e for i, e in enumerate(relay)}}}


def test_window_stats_are_changes_over_the_window():
    pdd = load_scenario("pdd-mini")
    first = _snapshot([_engine(busy=1.0, query=1000, hit=800)] * 2, [_engine(steps=10, decode=100, used=20)] * 2,
                      [_engine(waiting=0)])
    middle = _snapshot([_engine(busy=3.0, query=2000, hit=1700)] * 2, [_engine(steps=20, decode=400, used=90)] * 2,
                       [_engine(waiting=5)])
    last = _snapshot([_engine(busy=5.0, query=3000, hit=2600, host=100)] * 2,
                     [_engine(steps=30, decode=700, used=50)] * 2, [_engine(waiting=1)])
    stats = window_stats([(10.0, first), (15.0, middle), (20.0, last)], pdd)
    assert stats["prefill_busy"] == pytest.approx(4.0 / 10.0)  # 4 busy seconds of each 10 s instance
    assert stats["prefill_hit"] == pytest.approx((1800 + 100) / 2000)
    assert stats["md_batch_mean"] == pytest.approx(600 / 20)
    assert stats["md_kv_usage"] == pytest.approx(0.9)  # the fullest snapshot
    assert stats["rld_queue_max"] == 5


def test_no_relay_no_queue_and_too_few_snapshots_say_nothing():
    intra = load_scenario("pd-intra-mini")
    snap = _snapshot([_engine(busy=1.0)], [], [])
    snap["decode"] = snap.pop("main-decode") | {"role": "decode", "instances": {"d": _engine(steps=1, decode=1)}}
    assert window_stats([(0.0, snap)], intra) == {}
    assert window_stats([(0.0, snap), (1.0, snap)], intra)["rld_queue_max"] is None
