"""The search space: every deployment of each architecture the spec's GPUs, lines and budget allow.

Per architecture: which datacenter each role sits in (fixed by the architecture,
both choices for the single-datacenter ones), each pool's layout (TP, DP
attention, EP where the memory fits) and instance count, the step budget, the
line, and for PDD the relay's layout and count (one instance of the smallest
layout that holds the model is one option among them) and its policy knobs.

Per role and GPU the planner keeps the KEEP_LAYOUTS layouts that do most of that
role's work per GPU (prefill tokens/s; decode requests/s under the TPOT limit),
and the best of the smallest ones (the finest step of cost). This prunes layouts
that a replica count of a better one beats at the same price; the rest of the
space is enumerated whole.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import numpy as np

from services.plan.candidate import Candidate, PddKnobs, Pool
from services.plan.spec import PlanSpec
from services.plan.stages import Capacity, Layout, capacity, layouts
from services.plan.workload import WorkloadSample
from services.types import Role

KEEP_LAYOUTS = 2  # layouts kept per role and GPU
RELAY_COUNTS = (1, 2)  # the relay is small by design (docs/pdd-system.md): one or two instances


def _capacity(spec: PlanSpec, sample: WorkloadSample, layout: Layout, budget: int) -> Capacity:
    return capacity(spec.model, layout, budget, int(np.mean(sample.prompt - sample.missed)), int(sample.mean_prompt),
                    int(sample.mean_output), spec.slo.tpot_s)


def best_layouts(spec: PlanSpec, sample: WorkloadSample, gpu: str, budget: int, role: str) -> list[Layout]:
    """The `KEEP_LAYOUTS` layouts of `gpu` doing most of `role`'s work ("prefill", "decode" or "relay") per GPU."""
    found = layouts(spec.model, gpu)

    def per_gpu(layout: Layout) -> float:
        cap = _capacity(spec, sample, layout, budget)
        if role == "prefill":
            return cap.prefill_tokens_per_s / layout.tp
        if role == "relay":  # the relay's slots per GPU, the smallest instance first on a tie
            return cap.decode_slots / layout.tp - layout.tp * 1e-9
        return cap.decode_slots / max(cap.decode_step_s, 1e-12) / layout.tp

    ranked = sorted(found, key=lambda layout: (-per_gpu(layout), layout))
    kept = ranked[:KEEP_LAYOUTS]
    # the best of the smallest instances that hold the model, whatever it does per GPU: the finest step of
    # cost, which a budget may need (and, for the relay, the size the report's relay has)
    smallest = [layout for layout in ranked if found and layout.tp == min(f.tp for f in found)]
    return kept + [smallest[0]] if smallest and smallest[0] not in kept else kept


def _pools(spec: PlanSpec, sample: WorkloadSample, role: Role, dc: str, budget: int, kind: str,
           counts: tuple[int, ...] | None = None) -> list[Pool]:
    gpu = spec.gpus[dc].gpu
    counts = counts or tuple(range(1, spec.search.max_instances + 1))
    return [Pool(role, dc, layout, count) for layout in best_layouts(spec, sample, gpu, budget, kind)
            for count in counts]


def _price(spec: PlanSpec, pools: tuple[Pool, ...]) -> float:
    return sum(p.gpus * spec.gpus[p.dc].price_per_hour for p in pools)


def candidates(spec: PlanSpec, sample: WorkloadSample, architecture: str) -> Iterator[Candidate]:
    """Every candidate of `architecture` within the budget (all of them under a goodput target)."""
    limit = spec.budget_per_hour if spec.budget_per_hour is not None else float("inf")
    a, b = spec.dc_a, spec.dc_b
    knobs = [PddKnobs(t, cap, catch) for t in spec.search.transfer_thresholds_s for cap in spec.search.relay_caps
             for catch in spec.search.catch_up_thresholds]
    for budget in spec.search.step_budgets:
        def pools(role: Role, dc: str, kind: str, counts: tuple[int, ...] | None = None) -> list[Pool]:
            return _pools(spec, sample, role, dc, budget, kind, counts)

        if architecture == "colocated":
            shapes = [(p,) for dc in dict.fromkeys((a, b)) for p in pools(Role.COLOCATED, dc, "decode")]
            lines, knob_options = [None], [None]
        elif architecture == "pd-intra":
            shapes = [pair for dc in dict.fromkeys((a, b))
                      for pair in itertools.product(pools(Role.PREFILL, dc, "prefill"), pools(Role.DECODE, dc, "decode"))]
            lines, knob_options = [None], [None]
        elif architecture == "pd-cross":
            shapes = list(itertools.product(pools(Role.PREFILL, a, "prefill"), pools(Role.DECODE, b, "decode")))
            lines, knob_options = list(spec.wan), [None]
        else:
            shapes = list(itertools.product(pools(Role.PREFILL, a, "prefill"),
                                            pools(Role.RELAY_DECODE, a, "relay", RELAY_COUNTS),
                                            pools(Role.MAIN_DECODE, b, "decode")))
            lines, knob_options = list(spec.wan), knobs
        for shape in shapes:
            gpu_cost = _price(spec, shape)
            for line in lines:
                if gpu_cost + (line.price_per_hour if line else 0.0) > limit:
                    continue
                for knob in knob_options:
                    yield Candidate(architecture, shape, budget, line, knob)
