"""The analytic screen: a candidate's SLA goodput and binding stage from its stages' capacities.

For an offered rate R (requests per second) over the workload's sample (workload.py):

    prefill   S_i = m_i / tokens_per_s;  rho_p = R E[S] / n_p;  W_p = rho_p E[S^2] / (2 (1 - rho_p) E[S])
    line      X_i = m_i x KV bytes x 8 / rate;  rho_l = R E[X];  W_l = rho_l E[X^2] / (2 (1 - rho_l) E[X])
    TTFT_i    = W_p + max(S_i, delay + W_l + X_i)          (KV is streamed as prefill computes it)
    PDD       requests with W_l + X_i > threshold start on the relay: TTFT_i = W_p + S_i, while the relay holds
              R E[(W_l + X_i) 1{relayed}] sequences; past relay_max_load of its slots the rest go P-MD
    decode    rho_d = R / (n_d x decode_slots / (E[O] x step_s))      (stages.py)
    colocated prefill and decode share the instances: rho_p + rho_d <= 1, decode's slots sized at the TPOT
              limit times (1 - rho_p)

W is the Pollaczek-Khinchine mean wait of an M/G/1 queue per prefill instance and on
the line. The knee is the largest R with every rho below 1 and at least the SLO's
attainment of TTFT_i within the limit (bisection); its goodput is R times that
attainment. The binding stage is the throughput cap that sets the knee, or, where
the TTFT attainment sets it, the stage (prefill or the line) that the failing requests'
TTFTs are mostly spent in (docs/plan.md, "The screen").
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from services.plan.candidate import Candidate
from services.plan.spec import PlanSpec
from services.plan.stages import capacity
from services.plan.workload import WorkloadSample
from services.profiles import load_model
from services.scenario import PddSpec
from services.types import Role

RDMA_BPS, RDMA_DELAY_S = 400e9, 10e-6  # candidate.py's RDMA
RELAY_MAX_LOAD = PddSpec().relay_max_load  # the router's own: past it requests go P-MD
_ITERATIONS = 40  # bisection halvings of the rate: 2^-40 of the bracket


@dataclass(frozen=True)
class Screened:
    candidate: Candidate
    cost_per_hour: float
    goodput_rps: float
    knee_rate_rps: float
    binding_stage: str  # prefill, decode, relay, line or none
    utilisation: dict[str, float] = field(default_factory=dict)

    @property
    def bcr(self) -> float:
        return self.goodput_rps / self.cost_per_hour if self.cost_per_hour else 0.0


class _Model:
    """One candidate's stage terms, evaluated at any rate."""

    def __init__(self, candidate: Candidate, spec: PlanSpec, sample: WorkloadSample) -> None:
        self.spec, self.sample, self.c = spec, sample, candidate
        cached = int(np.mean(sample.prompt - sample.missed))
        context, output = int(sample.mean_prompt), int(sample.mean_output)
        caps = {p.role: (p, capacity(spec.model, p.layout, candidate.budget_tokens, cached, context, output,
                                     spec.slo.tpot_s)) for p in candidate.pools}
        front = candidate.pool(Role.PREFILL, Role.COLOCATED)
        self.n_p, self.tps = front.count, caps[front.role][1].prefill_tokens_per_s
        self.service = sample.missed / self.tps
        back = candidate.pool(Role.DECODE, Role.MAIN_DECODE, Role.COLOCATED)
        self.back, self.back_cap = back, caps[back.role][1]
        self.colocated = candidate.architecture == "colocated"
        self.wan = wan = len({p.dc for p in candidate.pools}) > 1
        rate, self.delay = (candidate.line.rate_bps, candidate.line.delay_s) if wan else (RDMA_BPS, RDMA_DELAY_S)
        self.transfer = sample.missed * load_model(spec.model).kv_bytes_per_token * 8 / rate
        relay = candidate.pool(Role.RELAY_DECODE)
        self.relay_slots = relay.count * caps[Role.RELAY_DECODE][1].decode_slots * RELAY_MAX_LOAD if relay else 0.0
        self.threshold = candidate.knobs.transfer_threshold_s if candidate.knobs else None
        self.output = sample.mean_output
        self.colocated_caps = {}

    @staticmethod
    def _wait(rho: float, x: np.ndarray) -> float:
        mean = float(x.mean())
        return rho * float((x * x).mean()) / (2 * (1 - rho) * mean) if mean > 0 else 0.0

    def _decode_rho(self, rate: float, rho_p: float) -> float:
        cap = self.back_cap
        if self.colocated:  # decode steps get the time prefill leaves, so their TPOT limit shrinks alike
            share = max(0.05, np.floor((1 - rho_p) * 20) / 20)
            spec, sample, layout = self.spec, self.sample, self.back.layout
            cap = capacity(spec.model, layout, self.c.budget_tokens, int(np.mean(sample.prompt - sample.missed)),
                           int(sample.mean_prompt), int(sample.mean_output), spec.slo.tpot_s * share)
        if cap.decode_slots == 0:
            return float("inf")
        per_instance = cap.decode_slots / (self.output * cap.decode_step_s)
        return rate / (self.back.count * per_instance)

    def at(self, rate: float) -> tuple[float, dict[str, float], dict[str, float]]:
        """(attainment, utilisation per stage, seconds the failing requests spent per stage) at `rate`."""
        rho_p = rate * float(self.service.mean()) / self.n_p
        rho_l = rate * float(self.transfer.mean())
        util = {"prefill": rho_p, "decode": self._decode_rho(rate, rho_p)}
        if self.colocated:
            util["decode"] += rho_p  # one pool's time
        if self.wan:
            util["line"] = rho_l
        if max(util.values()) >= 1:
            return 0.0, util, {}
        w_p, w_l = self._wait(rho_p, self.service), self._wait(rho_l, self.transfer)
        front = w_p + self.service
        line = self.delay + w_l + self.transfer
        ttft = np.maximum(front, line) if not self.colocated else front
        ok = ttft <= self.spec.slo.ttft_s
        if self.threshold is not None:
            relayed = (w_l + self.transfer) > self.threshold
            demand = rate * float(((w_l + self.transfer) * relayed).mean())
            admitted = min(1.0, self.relay_slots / demand) if demand > 0 else 1.0
            util["relay"] = demand / self.relay_slots * RELAY_MAX_LOAD if self.relay_slots else float("inf")
            fast = front <= self.spec.slo.ttft_s
            ok = np.where(relayed, admitted * fast + (1 - admitted) * ok, ok)
        failing = ~(ttft <= self.spec.slo.ttft_s)
        spent = {"prefill": float(front[failing].sum()), "line": float(line[failing].sum())}
        return float(np.mean(ok)), util, spent


def screen(candidate: Candidate, spec: PlanSpec, sample: WorkloadSample) -> Screened:
    model, cost = _Model(candidate, spec, sample), candidate.cost_per_hour(spec)
    target = spec.slo.attainment
    low, high = 0.0, 1.0
    while model.at(high)[0] >= target and high < 1e6:  # bracket the knee
        low, high = high, high * 2
    for _ in range(_ITERATIONS):
        middle = (low + high) / 2
        low, high = (middle, high) if model.at(middle)[0] >= target else (low, middle)
    if low == 0.0:
        return Screened(candidate, cost, 0.0, 0.0, "none", {})
    attainment, util, _ = model.at(low)
    _, over, spent = model.at(high * 1.001)
    capped = [stage for stage, rho in over.items() if rho >= 1]
    if capped:
        binding = max(capped, key=lambda s: over[s])
    elif "relay" in util and util["relay"] >= 1:
        binding = "relay"
    else:
        binding = max(spent, key=spent.get) if spent else "none"
    return Screened(candidate, cost, low * attainment, low, binding, {k: round(v, 4) for k, v in util.items()})
