from __future__ import annotations

import pytest

from services.engine.batch import Chunk, StepBatch
from services.engine.expert_dispatch import DispatchMode
from services.engine.overlap import comm_sm_share, compute_lost_seconds, overlapped_layers_seconds
from services.engine.roofline import RooflineClock
from services.profiles import load_gpu, load_model


def test_the_longer_of_compute_and_communication_sets_each_micro_batch():
    assert overlapped_layers_seconds(3.0, 1.0, 10, 0.0) == pytest.approx(10 * 2 * 3.0 + 1.0)
    assert overlapped_layers_seconds(1.0, 3.0, 10, 0.0) == pytest.approx(10 * 2 * 3.0 + 1.0)
    # what compute loses to the communication's SMs lengthens each micro-batch
    assert overlapped_layers_seconds(3.0, 1.0, 1, 0.2) == pytest.approx(2 * 3.2 + 1.0)
    assert overlapped_layers_seconds(3.0, 1.0, 0, 0.2) == 0.0


def test_normal_kernels_leave_compute_the_other_sms_for_the_whole_layer():
    h800 = load_gpu("h800-sxm")  # 132 SMs: 24 for DeepEP, DeepGEMM on the other 108 (DeepSeek profile-data)
    lost = compute_lost_seconds(h800, DispatchMode.NORMAL, compute_bound_s=1.08, comm_s=0.5)
    assert 1.08 + lost == pytest.approx(1.08 * 132 / 108)
    # the loss follows the compute-bound work, not how long the communication runs
    assert compute_lost_seconds(h800, DispatchMode.NORMAL, 1.08, 5.0) == pytest.approx(lost)
    assert compute_lost_seconds(h800, DispatchMode.NORMAL, 0.0, 5.0) == 0.0


def test_low_latency_kernels_cost_compute_only_while_they_send_and_receive():
    h100 = load_gpu("h100-sxm")
    assert compute_lost_seconds(h100, DispatchMode.LOW_LATENCY, 1.0, 0.17) == pytest.approx(0.06)
    assert compute_lost_seconds(h100, DispatchMode.LOW_LATENCY, 9.0, 0.17) == pytest.approx(0.06)


def test_low_latency_kernels_hold_the_sms_only_while_they_send_and_receive():
    h100 = load_gpu("h100-sxm")
    assert comm_sm_share(h100, DispatchMode.LOW_LATENCY) == pytest.approx(0.06 / 0.17)
    assert comm_sm_share(h100, DispatchMode.NORMAL) == pytest.approx(24 / 132)


def _prefill(**layout) -> float:
    clock = RooflineClock.for_names("h100-sxm", "deepseek-v3", tp=32, dp_attention=32, ep=32, **layout)
    return clock.step_seconds(StepBatch(chunks=(Chunk(4096),) * 128))


def test_overlap_hides_communication_of_a_large_ep_prefill():
    assert _prefill(tbo=True) < 0.85 * _prefill(tbo=False)
    assert _prefill() == _prefill(tbo=True)  # the default overlaps where it pays


def test_overlap_of_a_small_decode_batch_reads_the_weights_twice_and_is_left_off_by_default():
    def decode(**layout) -> float:
        clock = RooflineClock.for_names("h100-sxm", "pdd-paper", tp=16, dp_attention=16, ep=16, **layout)
        return clock.step_seconds(StepBatch(decode_contexts=(65536,) * 64))

    assert decode(tbo=True) > decode(tbo=False) == decode()


def test_predict_agrees_with_step_seconds_and_keeps_its_parts_whole_under_overlap():
    clock = RooflineClock.for_names("h100-sxm", "deepseek-v3", tp=32, dp_attention=32, ep=32, tbo=True)
    batch = StepBatch(chunks=(Chunk(4096),) * 128)
    prediction = clock.predict(batch)
    assert prediction.seconds == pytest.approx(clock.step_seconds(batch))
    assert prediction.compute_s > 0 and prediction.memory_s >= 0
    assert prediction.compute_s + prediction.memory_s <= prediction.seconds * (1 + 1e-9)


def test_overlapped_prefill_runs_its_compute_on_the_sms_the_communication_leaves():
    def moe_layers_s(sm_count: int) -> float:  # ten MoE layers: a 13-layer stack less its 3 dense layers
        gpu = load_gpu("h800-sxm").model_copy(update={"sm_count": sm_count})
        batch = StepBatch(chunks=(Chunk(4096),) * 128)
        stack = [RooflineClock(gpu, load_model("deepseek-v3"), tp=32, dp_attention=32, ep=32, tbo=True, layers=n)
                 for n in (13, 3)]
        return stack[0].step_seconds(batch) - stack[1].step_seconds(batch)

    # DeepSeek-V3 at 16K tokens per GPU is compute-bound under overlap: the fewer SMs left, the slower
    assert moe_layers_s(132) > moe_layers_s(264) > moe_layers_s(100_000)
    # compute-bound work runs on 108 of 132 SMs; memory-bound kernels (norms, quantisation) keep their pace
    assert 1.1 < moe_layers_s(132) / moe_layers_s(100_000) < 132 / 108


@pytest.mark.parametrize(("gpu", "measured_per_node"), [
    ("h800-sxm", 62_713),  # DeepSeek profile-data, balanced routing
    ("h100-sxm", 59_337),  # LMSYS large-scale EP post, simulated perfect EPLB
])
def test_large_ep_prefill_lands_within_15_percent_of_balanced_published_throughputs(gpu, measured_per_node):
    clock = RooflineClock.for_names(gpu, "deepseek-v3", tp=32, dp_attention=32, ep=32, dense_dp=True)
    seconds = clock.step_seconds(StepBatch(chunks=(Chunk(4096),) * 128))  # 16,384 tokens per GPU
    assert 8 * 16_384 / seconds == pytest.approx(measured_per_node, rel=0.15)
