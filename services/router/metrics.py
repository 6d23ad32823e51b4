"""The router's Prometheus metrics: vLLM names where one exists, pdd_* for the rest."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

_LATENCY = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120)
_ITL = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.3, 0.6, 1.2, 2.5, 5)


class RouterMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.ttft = Histogram("vllm:time_to_first_token_seconds", "Time to first token", buckets=_LATENCY,
                              registry=registry)
        self.itl = Histogram("vllm:inter_token_latency_seconds", "Gap between tokens", buckets=_ITL, registry=registry)
        self.e2e = Histogram("vllm:e2e_request_latency_seconds", "End-to-end request latency", buckets=_LATENCY,
                             registry=registry)
        self.success = Counter("vllm:request_success", "Requests finished", ["finished_reason"], registry=registry)
        self.prompt_tokens = Counter("vllm:prompt_tokens", "Prompt tokens", registry=registry)
        self.generation_tokens = Counter("vllm:generation_tokens", "Generated tokens", registry=registry)
        self.running = Gauge("vllm:num_requests_running", "Requests in flight at the router", registry=registry)
        self.errors = Counter("pdd_request_errors", "Requests that ended in an error", ["status"], registry=registry)
        self.pipelines = Counter("pdd_pipeline_requests", "Requests per pipeline", ["mode", "pipeline"],
                                 registry=registry)
        self.wan_bytes = Counter("pdd_wan_bytes", "Emulated KV bytes sent across the WAN", registry=registry)
        self.kv_transfer = Histogram("pdd_kv_transfer_seconds", "KV transfer time (announce to last byte)",
                                     buckets=_LATENCY, registry=registry)
        self.rld_tokens = Counter("pdd_rld_tokens", "Output tokens produced by relay decode", registry=registry)
        self.md_tokens = Counter("pdd_md_tokens", "Output tokens produced by main decode (or D)", registry=registry)
        self.handoffs = Counter("pdd_handoffs", "Relay-to-main handoffs", ["mode"], registry=registry)
        self.prefix_hits = Counter("vllm:prefix_cache_hits", "Prompt tokens served from a prefix cache",
                                   ["stage"], registry=registry)
        self.degraded = Counter("pdd_degraded_requests", "Requests served in a degraded mode (docs/reliability.md)",
                                ["kind"], registry=registry)

    def finished(self, pdd: dict, prompt_tokens: int, tokens: int) -> None:
        self.success.labels("length").inc()
        self.prompt_tokens.inc(prompt_tokens)
        self.generation_tokens.inc(tokens)
        self.pipelines.labels(pdd["mode"], pdd["pipeline"]).inc()
        self.wan_bytes.inc(pdd["wan_bytes"])
        self.kv_transfer.observe(pdd["kv_transfer_s"])
        self.rld_tokens.inc(pdd["rld_tokens"])
        self.md_tokens.inc(pdd["md_tokens"])
        self.prefix_hits.labels("prefill").inc(pdd["prefill_hit_tokens"])
        self.prefix_hits.labels("decode").inc(pdd["decode_hit_tokens"])
        if pdd.get("handoff"):
            self.handoffs.labels(pdd["handoff"]["mode"]).inc()
        if pdd.get("degraded"):
            self.degraded.labels(pdd["degraded"]).inc()
