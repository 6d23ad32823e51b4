from services.router.policy import PipelinePolicy
from services.scenario import LinkSpec, PddSpec
from services.types import Pipeline

KV = 131072  # Llama-3-8B bytes per token
WAN = LinkSpec(rate_bps="10gbit", delay_s="5ms")


def test_low_hit_goes_through_the_relay_and_high_hit_goes_direct():
    policy = PipelinePolicy(WAN, PddSpec(transfer_threshold_s="500ms"))
    assert policy.choose(30000 * KV, relay_load=0.1).pipeline is Pipeline.P_RLD_MD  # about 3.1 s
    assert policy.choose(300 * KV, relay_load=0.1).pipeline is Pipeline.P_MD  # about 36 ms


def test_saturated_or_missing_relay_sends_requests_direct():
    policy = PipelinePolicy(WAN, PddSpec(relay_max_load=0.8))
    assert policy.choose(30000 * KV, relay_load=0.85).reason == "relay saturated"
    assert policy.choose(30000 * KV, relay_load=None).pipeline is Pipeline.P_MD


def test_queued_bytes_push_small_transfers_over_the_threshold():
    policy = PipelinePolicy(WAN, PddSpec(transfer_threshold_s="500ms"))
    small = 2000 * KV  # about 0.2 s alone
    assert policy.choose(small, 0.0).pipeline is Pipeline.P_MD
    policy.dispatched(4000 * KV)
    assert policy.choose(small, 0.0).pipeline is Pipeline.P_RLD_MD
    policy.landed(4000 * KV, 0.4, 0)
    assert policy.in_flight_bytes == 0


def test_slow_observed_transfers_raise_the_estimate():
    policy = PipelinePolicy(WAN, PddSpec(transfer_threshold_s="500ms"))
    size = 3000 * KV  # about 0.32 s predicted
    assert policy.choose(size, 0.0).pipeline is Pipeline.P_MD
    for _ in range(10):
        policy.landed(size, 3 * policy.predict_s(size), 0)  # the line is three times slower than its rate
    assert policy.correction > 2
    assert policy.choose(size, 0.0).pipeline is Pipeline.P_RLD_MD


def test_bytes_stop_queueing_when_they_arrive_and_the_sample_comes_later():
    policy = PipelinePolicy(WAN, PddSpec(transfer_threshold_s="500ms"))
    policy.dispatched(4000 * KV)
    policy.arrived(4000 * KV)  # main decode has the KV; the request is still decoding
    assert policy.in_flight_bytes == 0 and policy.correction == 1.0
    policy.observe(4000 * KV, 2 * policy.predict_s(4000 * KV), 0)
    assert policy.correction > 1.0 and policy.in_flight_bytes == 0
