"""The streamed-KV pipeline estimate: main decode's wait after prefill, the transfer less its overlap."""

from __future__ import annotations

import pytest

from services.engine.roofline import RooflineClock
from services.router.policy import PipelinePolicy
from services.router.policy_stream import PrefillChunks, streamed_wait_s
from services.scenario import LinkSpec, PddSpec
from services.scenario.loader import load_scenario
from services.types import Pipeline

WAN = LinkSpec(rate_bps=8e9, delay_s=0.005)  # 1 GB/s: a byte count in GB reads as seconds
GB = 10**9


def test_one_part_is_the_whole_transfer_after_prefill():
    policy = PipelinePolicy(WAN, PddSpec())
    assert streamed_wait_s(WAN, [(1.0, 2 * GB)], GB // 2) == pytest.approx(policy.predict_s(2 * GB, GB // 2))


def test_a_line_slower_than_prefill_hides_everything_after_the_first_chunk():
    parts = [(0.2, GB // 2), (0.4, GB // 2), (0.6, GB // 2), (0.8, GB // 2)]  # 0.5 s of line per 0.2 s chunk
    assert streamed_wait_s(WAN, parts, 0) == pytest.approx(0.005 + 2.0 - (0.8 - 0.2))


def test_a_line_faster_than_prefill_leaves_only_the_last_chunk():
    parts = [(0.2, GB // 10), (0.4, GB // 10), (0.6, GB // 10)]
    assert streamed_wait_s(WAN, parts, 0) == pytest.approx(0.005 + 0.1)


def test_bytes_already_queued_go_first():
    parts = [(0.2, GB // 10), (0.4, GB // 10), (0.6, GB // 10)]
    assert streamed_wait_s(WAN, parts, GB) == pytest.approx(0.005 + 0.2 + 1.0 + 0.3 - 0.6)


def test_chunks_follow_the_prefill_pool_roofline():
    scenario = load_scenario("pdd-mini")
    chunks = PrefillChunks(scenario)
    parts = chunks.parts(4096, 40960, 131072)
    assert [n for _, n in parts] == [8192 * 131072] * 4 + [4096 * 131072]
    pool = next(p for p in scenario.pools if p.role.value == "prefill")
    clock = RooflineClock.for_names(pool.gpu, scenario.model, tp=pool.tp)
    assert parts[-1][0] == pytest.approx(clock.chunked_prefill_seconds(36864, 8192, cached_tokens=4096))
    assert chunks.parts(100, 100, 131072) == []  # nothing missing: nothing to stream


def test_streaming_can_make_a_long_transfer_short_enough_for_p_md():
    policy = PipelinePolicy(WAN, PddSpec(transfer_threshold_s="500ms"))
    whole = 4 * GB // 5  # 0.8 s after prefill: through the relay
    assert policy.choose(whole, relay_load=0.1).pipeline is Pipeline.P_RLD_MD
    parts = [(0.5 * (i + 1), GB // 5) for i in range(4)]  # 0.2 s of line per 0.5 s chunk: 0.2 s left
    choice = policy.choose(whole, relay_load=0.1, parts=parts)
    assert choice.pipeline is Pipeline.P_MD and choice.estimate_s == pytest.approx(0.205)
    policy.observe(whole, 0.41, 0, parts)  # twice the predicted wait moves the correction up
    assert policy.correction == pytest.approx(1.2)
