"""Router metrics: vLLM names, `model_name` everywhere, per-request TPOT, queue and prefill phases."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from services.router.metrics import RouterMetrics

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


def test_waiting_and_running_are_separate_gauges():
    registry = CollectorRegistry()
    metrics = RouterMetrics(registry, "m")
    metrics.waiting.inc()
    metrics.running.inc(2)
    samples = _samples(registry)
    assert samples[("vllm:num_requests_waiting", (("model_name", "m"),))] == 1
    assert samples[("vllm:num_requests_running", (("model_name", "m"),))] == 2
