from __future__ import annotations

import pytest

from services.engine.expert_dispatch import DispatchMode, ExpertDispatch, expected_bins_touched
from services.profiles import load_gpu, load_model

H100, V3 = load_gpu("h100-sxm"), load_model("deepseek-v3")


def test_node_limited_routing_reaches_fewer_nodes_than_free_routing():
    limited = expected_bins_touched(256, 8, 4, 8, 8)  # 4 of 8 groups, one group per node
    free = expected_bins_touched(256, 1, 1, 8, 8)
    assert limited < 4.0 < free < 8.0
    assert expected_bins_touched(256, 1, 1, 8, 1) == pytest.approx(1.0)


def test_normal_dispatch_sends_each_token_once_per_remote_node():
    dispatch = ExpertDispatch.of(H100, V3, ep=32)
    assert dispatch.nodes == 4
    assert 0 < dispatch.remote_nodes_per_token < 3  # at most 3 other nodes, not 8 copies
    # twice the tokens, twice the bytes: time grows linearly above the fixed latency
    one, two = dispatch.seconds(8192, DispatchMode.NORMAL), dispatch.seconds(16384, DispatchMode.NORMAL)
    assert two == pytest.approx(2 * one - 2 * H100.nic_latency_s.value)


def test_low_latency_sends_a_copy_per_expert_and_costs_more_per_token():
    dispatch = ExpertDispatch.of(H100, V3, ep=32)
    assert dispatch.seconds(128, DispatchMode.LOW_LATENCY) > dispatch.seconds(128, DispatchMode.NORMAL)


def test_imbalance_slows_the_busiest_gpu():
    balanced = ExpertDispatch.of(H100, V3, ep=64).seconds(4096, DispatchMode.NORMAL)
    skewed = ExpertDispatch.of(H100, V3, ep=64, imbalance=1.5).seconds(4096, DispatchMode.NORMAL)
    assert skewed > 1.4 * balanced


def test_no_expert_parallelism_sends_nothing():
    assert ExpertDispatch.of(H100, V3, ep=1).seconds(4096, DispatchMode.NORMAL) == 0.0
