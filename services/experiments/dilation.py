"""Time dilation: run an emulated deployment k times slower than real time, then report in emulated time.

Each output token costs the emulator CPU time (decode, router and client
together, `TOKEN_CPU_S`), so a deployment that emits more tokens per second than
the machine's CPUs can carry would be measured on the emulator's overhead, not
on its model. Dilating time by k divides the real token rate by
k and leaves every emulated quantity alone (docs/experiments.md §Time dilation):

    real step time      = k x roofline step time    (Scenario.time_dilation)
    real link rate      = emulated rate / k,  real delay and jitter = k x emulated
    real SLA, timeouts, transfer threshold, think time = k x emulated
    real offered rate   = emulated rate / k
    reported durations  = real durations / k

The emulator's own overheads (event-loop lag, RPC latency) shrink by k when
read in emulated time, which is the point.
"""

from __future__ import annotations

from loadgen.spec import parse_options, parse_spec
from services.scenario import LinkSpec, Scenario

# CPU seconds one streamed output token costs the mesh and the bench client together on the 2-core
# machine: benchmarks/bench_token_cost.py, three runs from a fresh clone (docs/mesh-measured.md §Cost of a
# streamed token, "The feed on its own port"), on the costliest preset, pdd-mini: mesh total 42.2 us
# (the median of 53.8, 42.2, 37.5) plus that run's bench client, 21.6 us per chunk, rounded up. The
# experiments run PDD deployments as well as PD ones, so the budget is set by PDD's cost. Earlier
# derivations: 100 us (the third round, gRPC feed), 0.35 ms before the token feed.
TOKEN_CPU_S = 70e-6
# CPU seconds per second the emulator may spend streaming tokens: the share of the two cores the first
# derivation allowed (2000 tokens/s x 0.35 ms), kept so that prefill, KV bytes and the OS keep the rest.
TOKEN_CPU_BUDGET = 0.7
REAL_TOKENS_PER_S = TOKEN_CPU_BUDGET / TOKEN_CPU_S  # the output-token rate the mesh carries comfortably

_RECORD_SECONDS = ("send_s", "ttft_s", "tpot_s", "e2e_s", "elapsed_s")
_PDD_SECONDS = ("kv_transfer_s",)


def dilate_link(link: LinkSpec, k: float) -> LinkSpec:
    if link.schedule is not None:
        raise ValueError("a link schedule's times are not dilated; run it undilated (time dilation 1)")
    return link.model_copy(update={"rate_bps": link.rate_bps / k, "delay_s": link.delay_s * k,
                                   "jitter_s": link.jitter_s * k})


def dilate_scenario(scenario: Scenario, k: float) -> Scenario:
    """The same deployment with every duration stretched by k and every rate divided by k."""
    if k < 1:
        raise ValueError(f"time dilation {k!r} must be at least 1")
    if k == 1:
        return scenario
    return scenario.model_copy(update={
        "time_dilation": k,
        "rdma": dilate_link(scenario.rdma, k),
        "wan": dilate_link(scenario.wan, k),
        "sla": scenario.sla.model_copy(update={"ttft_s": scenario.sla.ttft_s * k, "tpot_s": scenario.sla.tpot_s * k}),
        "pdd": scenario.pdd.model_copy(update={"transfer_threshold_s": scenario.pdd.transfer_threshold_s * k}),
        "request_timeout_s": scenario.request_timeout_s * k,
        "transfer_timeout_s": scenario.transfer_timeout_s * k,
    })


def dilate_workload(spec: str, k: float) -> str:
    """A workload SPEC as a dilated closed loop sends it: its think time k times `spec`'s.

    Think time is the only duration a workload spec holds; a closed loop's other timing is the
    deployment's answer, which the dilated scenario stretches. A trace's timestamps are not dilated.
    """
    if k == 1:
        return spec
    config = parse_spec(spec)
    head, _, rest = spec.strip().partition(":")
    kind = head.strip().lower()
    if kind == "mooncake":
        raise ValueError("a trace's timestamps are not dilated; replay it undilated (time dilation 1)")
    if not hasattr(config, "think"):
        return spec
    options = parse_options(rest, kind)
    options["think"] = repr(config.think * k)
    return f"{kind}:" + ",".join(f"{key}={value}" for key, value in options.items())


def to_emulated_record(record: dict, k: float) -> dict:
    """A request record read in emulated time: every duration divided by k (timestamps stay wall-clock)."""
    if k == 1:
        return record
    out = dict(record)
    for key in _RECORD_SECONDS:
        if out.get(key) is not None:
            out[key] = out[key] / k
    out["itl_s"] = [gap / k for gap in out.get("itl_s") or []]
    pdd = out.get("pdd")
    if pdd:
        pdd = dict(pdd)
        for key in _PDD_SECONDS:
            if pdd.get(key) is not None:
                pdd[key] = pdd[key] / k
        if pdd.get("handoff"):
            handoff = dict(pdd["handoff"])
            if handoff.get("stall_s") is not None:
                handoff["stall_s"] = handoff["stall_s"] / k
            pdd["handoff"] = handoff
        out["pdd"] = pdd
    return out


def dilation_for(rate: float, mean_output_tokens: float, real_tokens_per_s: float) -> float:
    """The smallest k >= 1 that keeps the real output-token rate at or under `real_tokens_per_s`."""
    return max(1.0, rate * mean_output_tokens / real_tokens_per_s)
