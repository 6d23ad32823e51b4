"""Router metrics: vLLM names, `model_name` everywhere, per-request TPOT, queue and prefill phases."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from services.router.metrics import GapHistogram, RouterMetrics, counts_buckets
from tests.tolerance import assert_close

PDD = {"mode": "pdd", "pipeline": "p-md", "wan_bytes": 10, "kv_transfer_s": 0.2, "rld_tokens": 0, "md_tokens": 5,
       "prefill_hit_tokens": 30, "decode_hit_tokens": 20, "handoff": {"mode": "one-shot", "stall_s": 0.03},
       "queued_s": 0.5, "timeline": {"prefill_done": 102.0, "first_token": 102.5}}


def _samples(registry: CollectorRegistry) -> dict[tuple[str, tuple], float]:
    out = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_a_finished_request_fills_the_vllm_families():
    registry = CollectorRegistry()
    metrics = RouterMetrics(registry, "llama3-8b")
    metrics.finished(PDD, 100, 5, "stop", received_unix=100.0, ttft_s=1.0, e2e_s=3.0)
    samples = _samples(registry)
    model = ("model_name", "llama3-8b")
    assert samples[("vllm:request_success_total", (("finished_reason", "stop"), model))] == 1
    assert samples[("vllm:request_time_per_output_token_seconds_sum", (model,))] == 0.5  # (3 - 1) / 4
    assert samples[("vllm:request_queue_time_seconds_sum", (model,))] == 0.5
    assert samples[("vllm:request_prefill_time_seconds_sum", (model,))] == 1.5  # 102 - 100 - 0.5
    assert samples[("vllm:generation_tokens_total", (model,))] == 5
    assert samples[("pdd_handoff_stall_seconds_sum", ())] == 0.03
    assert all(dict(labels).get("model_name") == "llama3-8b" for name, labels in samples if name.startswith("vllm:"))


def test_the_dashboard_series_take_a_finished_request_with_vllms_buckets():
    registry = CollectorRegistry()
    metrics = RouterMetrics(registry, "llama3-8b", max_model_len=8192)
    metrics.finished(PDD, 100, 5, "stop", received_unix=100.0, ttft_s=1.0, e2e_s=3.0)
    samples, model = _samples(registry), ("model_name", "llama3-8b")
    assert samples[("vllm:request_decode_time_seconds_sum", (model,))] == 2.0  # first token to last
    assert samples[("vllm:request_inference_time_seconds_sum", (model,))] == 2.5  # E2E less the queue
    assert samples[("vllm:request_prompt_tokens_bucket", (("le", "50.0"), model))] == 0
    assert samples[("vllm:request_prompt_tokens_bucket", (("le", "100.0"), model))] == 1
    assert samples[("vllm:request_generation_tokens_bucket", (("le", "5.0"), model))] == 1
    assert ("vllm:request_prompt_tokens_bucket", (("le", "5000.0"), model)) in samples
    assert ("vllm:request_prompt_tokens_bucket", (("le", "10000.0"), model)) not in samples  # past the context
    assert samples[("vllm:num_requests_swapped", (model,))] == 0
    e2e = sorted(float(dict(labels)["le"]) for name, labels in samples
                 if name == "vllm:e2e_request_latency_seconds_bucket")
    assert e2e[:9] == [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0] and e2e[-2] == 7680.0


def test_count_buckets_are_vllms_one_two_five_up_to_the_context():
    assert counts_buckets(8) == (1, 2, 5)
    assert counts_buckets(1000) == (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)


def test_waiting_and_running_are_separate_gauges():
    registry = CollectorRegistry()
    metrics = RouterMetrics(registry, "m")
    metrics.waiting.inc()
    metrics.running.inc(2)
    samples = _samples(registry)
    assert samples[("vllm:num_requests_waiting", (("model_name", "m"),))] == 1
    assert samples[("vllm:num_requests_running", (("model_name", "m"),))] == 2


def test_gaps_handed_over_in_batches_read_as_prometheus_clients_own_histogram():
    gaps = [0.0005, 0.001, 0.003, 0.01, 0.0101, 0.5, 7.0, 0.001]  # on bounds, between them, past the last
    ours_registry, theirs_registry = CollectorRegistry(), CollectorRegistry()
    ours = GapHistogram("vllm:inter_token_latency_seconds", "Gap", (0.001, 0.005, 0.01, 1.0), "m", ours_registry)
    theirs = Histogram("vllm:inter_token_latency_seconds", "Gap", ["model_name"], buckets=(0.001, 0.005, 0.01, 1.0),
                       registry=theirs_registry).labels("m")
    ours.observe_many(gaps[:5])
    ours.observe_many([])
    ours.observe(gaps[5])
    ours.observe_many(gaps[6:])
    for gap in gaps:
        theirs.observe(gap)
    wanted = {key: value for key, value in _samples(theirs_registry).items() if not key[0].endswith("_created")}
    got = _samples(ours_registry)
    total = ("vllm:inter_token_latency_seconds_sum", (("model_name", "m"),))
    assert_close(got.pop(total), wanted.pop(total), rel=1e-12, what="sum of the gaps")  # summed in another order
    assert got == wanted
    assert wanted[("vllm:inter_token_latency_seconds_bucket", (("le", "0.001"), ("model_name", "m")))] == 3
