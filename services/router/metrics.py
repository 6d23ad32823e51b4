"""The router's Prometheus metrics: vLLM's names and labels where one exists, pdd_* for the rest.

Every vllm:* metric carries `model_name`, as vLLM's do, so vLLM dashboards work
unchanged. These count user requests; the pools' per-replica metrics
(services/instances.py) use other names wherever the router already counts
the same thing, so a sum over all targets counts each token once. The table
with vLLM equivalents is in docs/mesh.md, "Metrics".
"""

from __future__ import annotations

import collections
import time

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.utils import floatToGoString

# vLLM's buckets for its series of the same names (vllm/v1/metrics/loggers.py): time to first token, one
# output token's time (TPOT and ITL), and a request's phases (E2E, queue, prefill, decode, inference).
_TTFT = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
         80.0, 160.0, 640.0, 2560.0)
_ITL = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)
_REQUEST = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
            960.0, 1920.0, 7680.0)
# pdd-emu's own series: transfers and stalls run from milliseconds, finer at the low end than vLLM's.
_LATENCY = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120)
_STALL = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.3, 0.6, 1.2, 2.5, 5)
_MODEL = ["model_name"]
RECENT_REQUESTS = 8192  # finished requests kept for the live page's exact percentiles (services/router/dashboard/)


def counts_buckets(max_model_len: int) -> tuple[int, ...]:
    """vLLM's `build_1_2_5_buckets`: 1, 2, 5, 10, 20, 50, ... up to the model's context."""
    bounds, magnitude = [], 1
    while True:
        for step in (1, 2, 5):
            if step * magnitude > max_model_len:
                return tuple(bounds)
            bounds.append(step * magnitude)
        magnitude *= 10


class RouterMetrics:
    def __init__(self, registry: CollectorRegistry, model_name: str = "", wan_rate_bps: float = 0.0,
                 max_model_len: int = 131072) -> None:
        self.model_name = model_name

        def vllm(kind, name: str, doc: str, **kw):
            return kind(name, doc, _MODEL, registry=registry, **kw).labels(model_name)

        self.ttft = vllm(Histogram, "vllm:time_to_first_token_seconds", "Time to first token", buckets=_TTFT)
        self.itl = GapHistogram("vllm:inter_token_latency_seconds", "Gap between tokens", _ITL, model_name,
                                registry)
        self.e2e = vllm(Histogram, "vllm:e2e_request_latency_seconds", "End-to-end request latency",
                        buckets=_REQUEST)
        self.tpot = vllm(Histogram, "vllm:request_time_per_output_token_seconds",
                         "Per request: (E2E - TTFT) / (output tokens - 1)", buckets=_ITL)
        self.queue = vllm(Histogram, "vllm:request_queue_time_seconds",
                          "Time the request waited in an engine queue before its prefill", buckets=_REQUEST)
        self.prefill = vllm(Histogram, "vllm:request_prefill_time_seconds",
                            "Time from leaving the queue to the end of prefill", buckets=_REQUEST)
        self.decode = vllm(Histogram, "vllm:request_decode_time_seconds",
                           "Time from the first output token to the last", buckets=_REQUEST)
        self.inference = vllm(Histogram, "vllm:request_inference_time_seconds",
                              "Time from leaving the queue to the last token (prefill and decode)", buckets=_REQUEST)
        counts = counts_buckets(max_model_len)
        self.prompt_lengths = vllm(Histogram, "vllm:request_prompt_tokens", "Prompt tokens per request",
                                   buckets=counts)
        self.output_lengths = vllm(Histogram, "vllm:request_generation_tokens", "Generated tokens per request",
                                   buckets=counts)
        self._success = Counter("vllm:request_success", "Requests finished", [*_MODEL, "finished_reason"],
                                registry=registry)
        self.prompt_tokens = vllm(Counter, "vllm:prompt_tokens", "Prompt tokens")
        self.generation_tokens = vllm(Counter, "vllm:generation_tokens", "Generated tokens")
        self.running = vllm(Gauge, "vllm:num_requests_running", "Requests in flight that have their first token")
        self.waiting = vllm(Gauge, "vllm:num_requests_waiting", "Requests in flight still waiting for a first token")
        # The emulated engines recompute a preempted sequence and never swap it to host memory: always 0.
        vllm(Gauge, "vllm:num_requests_swapped", "Requests swapped out to host memory (none: preemption recomputes)")
        self.errors = Counter("pdd_request_errors", "Requests that ended in an error", ["status"], registry=registry)
        self.pipelines = Counter("pdd_pipeline_requests", "Requests per pipeline", ["mode", "pipeline"],
                                 registry=registry)
        self.wan_bytes = Counter("pdd_wan_bytes", "Emulated KV bytes sent across the WAN", registry=registry)
        Gauge("pdd_wan_line_rate_bps", "The WAN line's emulated rate (for utilisation)",
              registry=registry).set(wan_rate_bps)
        self.kv_transfer = Histogram("pdd_kv_transfer_seconds", "KV transfer time (announce to last byte)",
                                     buckets=_LATENCY, registry=registry)
        self.rld_tokens = Counter("pdd_rld_tokens", "Output tokens produced by relay decode", registry=registry)
        self.md_tokens = Counter("pdd_md_tokens", "Output tokens produced by main decode (or D)", registry=registry)
        self.handoffs = Counter("pdd_handoffs", "Relay-to-main handoffs", ["mode"], registry=registry)
        self.handoff_stall = Histogram("pdd_handoff_stall_seconds", "Main decode's recompute stall at a handoff",
                                       buckets=_STALL, registry=registry)
        self.prefix_hits = Counter("pdd_prefix_hit_tokens", "Prompt tokens served from a prefix cache, per stage",
                                   ["stage"], registry=registry)
        self.degraded = Counter("pdd_degraded_requests", "Requests served in a degraded mode (docs/reliability.md)",
                                ["kind"], registry=registry)
        # (monotonic end, TTFT, TPOT or None) of the last requests: histogram buckets are too coarse to tell a
        # p99 from the SLA, and an append is all a request pays.
        self.recent: collections.deque[tuple[float, float, float | None]] = collections.deque(maxlen=RECENT_REQUESTS)

    def finished(self, pdd: dict, prompt_tokens: int, tokens: int, finish_reason: str = "length", *,
                 received_unix: float | None = None, ttft_s: float | None = None,
                 e2e_s: float | None = None) -> None:
        self._success.labels(self.model_name, finish_reason).inc()
        self.prompt_tokens.inc(prompt_tokens)
        self.generation_tokens.inc(tokens)
        self.prompt_lengths.observe(prompt_tokens)
        self.output_lengths.observe(tokens)
        tpot_s = None
        if ttft_s is not None and e2e_s is not None:
            self.decode.observe(e2e_s - ttft_s)
            self.inference.observe(max(0.0, e2e_s - pdd.get("queued_s", 0.0)))
            if tokens > 1:
                tpot_s = (e2e_s - ttft_s) / (tokens - 1)
                self.tpot.observe(tpot_s)
        if ttft_s is not None:
            self.recent.append((time.monotonic(), ttft_s, tpot_s))
        self._phases(pdd, received_unix)
        self.pipelines.labels(pdd["mode"], pdd["pipeline"]).inc()
        self.wan_bytes.inc(pdd["wan_bytes"])
        self.kv_transfer.observe(pdd["kv_transfer_s"])
        self.rld_tokens.inc(pdd["rld_tokens"])
        self.md_tokens.inc(pdd["md_tokens"])
        self.prefix_hits.labels("prefill").inc(pdd["prefill_hit_tokens"])
        self.prefix_hits.labels("decode").inc(pdd["decode_hit_tokens"])
        if pdd.get("handoff"):
            self.handoffs.labels(pdd["handoff"]["mode"]).inc()
            self.handoff_stall.observe(pdd["handoff"].get("stall_s", 0.0))
        if pdd.get("degraded"):
            self.degraded.labels(pdd["degraded"]).inc()

    def _phases(self, pdd: dict, received_unix: float | None) -> None:
        """Queue and prefill time as vLLM splits them: waiting, then prefill up to its last prompt token."""
        queued = pdd.get("queued_s", 0.0)
        self.queue.observe(queued)
        timeline = pdd.get("timeline", {})
        received = timeline.get("received", received_unix)
        end = timeline.get("prefill_done") or timeline.get("first_token")
        if received is not None and end is not None:
            self.prefill.observe(max(0.0, end - received - queued))


class GapHistogram:
    """A Prometheus histogram filled many observations at a time: the gaps between a stream's tokens.

    prometheus_client's `observe` takes a lock and walks the buckets for every value, a few
    microseconds per streamed token at the router. A stream keeps its gaps and hands them over
    every `FLUSH_GAPS` tokens and at its end, one numpy pass each, so the metric means the same and
    lags a live stream by at most that many gaps (docs/mesh.md §Metrics). Scrapes run on the event
    loop, as the updates do, so no lock is needed.
    """

    FLUSH_GAPS = 64

    def __init__(self, name: str, doc: str, buckets: tuple[float, ...], model_name: str,
                 registry: CollectorRegistry) -> None:
        self.name, self.doc, self.model_name = name, doc, model_name
        self._bounds = np.array([*buckets, float("inf")])
        self._counts = np.zeros(len(self._bounds), dtype=np.int64)
        self._sum = 0.0
        registry.register(self)

    def observe(self, value: float) -> None:
        self.observe_many([value])

    def observe_many(self, values: list[float]) -> None:
        if not values:
            return
        # A value equal to a bound belongs to that bound's bucket (Prometheus' `le`): side="left".
        self._counts += np.bincount(np.searchsorted(self._bounds, values, side="left"),
                                    minlength=len(self._bounds))
        self._sum += sum(values)

    def collect(self):
        family = HistogramMetricFamily(self.name, self.doc, labels=["model_name"])
        cumulative = np.cumsum(self._counts).tolist()
        family.add_metric([self.model_name], [(floatToGoString(b), c) for b, c in zip(self._bounds, cumulative)],
                          sum_value=self._sum)
        yield family

    def describe(self):
        return [HistogramMetricFamily(self.name, self.doc, labels=["model_name"])]
