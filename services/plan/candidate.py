"""One deployment the planner considers, and the scenario it is: what `pdd-emu up` and `simulate` run.

The scenario's prices are the spec's (each pool carries its datacenter's price,
the line its option's), so services/scenario/cost.py prices it exactly as every
other figure of the product is priced.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.plan.spec import LineOffer, PlanSpec
from services.plan.stages import Layout
from services.scenario import EngineSpec, LinkSpec, PddSpec, PoolSpec, Scenario, SlaSpec
from services.scenario.cost import cost_per_hour
from services.types import Mode, Role

ROLE_NAMES = {Role.COLOCATED: "colocated", Role.PREFILL: "prefill", Role.DECODE: "decode",
              Role.RELAY_DECODE: "relay-decode", Role.MAIN_DECODE: "main-decode"}
RDMA = LinkSpec(rate_bps=400e9, delay_s=10e-6)  # the presets' intra-datacenter link


@dataclass(frozen=True, order=True)
class Pool:
    role: Role
    dc: str
    layout: Layout
    count: int

    @property
    def gpus(self) -> int:
        return self.layout.tp * self.count


@dataclass(frozen=True, order=True)
class PddKnobs:
    transfer_threshold_s: float = 0.5
    relay_cap: int = 512
    catch_up_threshold: int = 64


@dataclass(frozen=True)
class Candidate:
    architecture: str
    pools: tuple[Pool, ...]
    budget_tokens: int  # every pool's engine step budget
    line: LineOffer | None = None
    knobs: PddKnobs | None = None

    def pool(self, *roles: Role) -> Pool | None:
        return next((p for p in self.pools if p.role in roles), None)

    def label(self) -> str:
        parts = [f"{ROLE_NAMES[p.role]} {p.count} x {p.layout.label()}" for p in self.pools]
        if self.line is not None and len({p.dc for p in self.pools}) > 1:
            parts.append(f"line {self.line.rate_bps / 1e9:g} Gbit/s")
        if self.knobs is not None:
            parts.append(f"relay above {self.knobs.transfer_threshold_s:g} s")
        return "; ".join(parts)

    def key(self) -> str:
        """The label and everything it leaves out: unique per candidate, and independent of prices."""
        line = "" if self.line is None else f"{self.line.rate_bps:g}/{self.line.delay_s:g}"
        return f"{self.label()} | step {self.budget_tokens} | {line} | {self.knobs}"

    def scenario(self, spec: PlanSpec, name: str | None = None, seed: int = 7) -> Scenario:
        """The deployment as a scenario, priced from `spec`."""
        pools = tuple(PoolSpec(name=ROLE_NAMES[p.role], role=p.role, dc=p.dc, gpu=p.layout.gpu, tp=p.layout.tp,
                               dp_attention=p.layout.dp_attention, ep=p.layout.ep, count=p.count,
                               price_per_hour=spec.gpus[p.dc].price_per_hour) for p in self.pools)
        line = self.line or LineOffer(rate="10gbit", price_per_hour=0.0)
        knobs = self.knobs or PddKnobs()
        return Scenario(
            name=name or f"plan-{self.architecture}", mode=Mode(self.architecture), model=spec.model, seed=seed,
            description=f"planned by pdd-emu plan: {self.label()}", byte_scale=spec.search.byte_scale, pools=pools,
            rdma=RDMA, wan=LinkSpec(rate_bps=line.rate_bps, delay_s=line.delay_s),
            wan_price_per_hour=line.price_per_hour, engine=EngineSpec(max_batched_tokens=self.budget_tokens),
            sla=SlaSpec(ttft_s=spec.slo.ttft_s, tpot_s=spec.slo.tpot_s),
            pdd=PddSpec(transfer_threshold_s=knobs.transfer_threshold_s, relay_cap=knobs.relay_cap,
                        catch_up_threshold=knobs.catch_up_threshold),
            # Little's law at the SLA's edge for a few hundred req/s: the router must not refuse before the SLA fails
            max_inflight=8192)

    def cost_per_hour(self, spec: PlanSpec) -> float:
        return cost_per_hour(self.scenario(spec))
