"""What each op of a decoder layer costs: its own roofline at the achieved rates of `OpRates`.

Calibration fits those rates through the same functions; the ops' shapes are in
layer_shapes.py (docs/roofline.md §Shapes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from services.profiles.gpu import GpuProfile
from services.types import LaunchStyle

if TYPE_CHECKING:
    from services.engine.layer_shapes import Gemm

ACTIVATION_BYTES = 2  # bf16 activations whatever the weight dtype
Bound = Literal["compute", "memory", "overhead"]

@dataclass(frozen=True, slots=True)
class StepPrediction:
    seconds: float
    flops: float  # one GPU's share
    bytes: float  # one GPU's HBM traffic
    bound: Bound
    compute_s: float  # ops whose compute time exceeds their memory time
    memory_s: float  # memory-bound ops plus tensor-parallel communication
    overhead_s: float  # launch and per-step fixed costs
    launch_style: LaunchStyle


@dataclass(frozen=True, slots=True)
class TokenCosts:
    """Everything in a step that depends only on its token and sequence counts (memoised)."""

    gpu_s: float  # compute_s + memory_s
    compute_s: float
    memory_s: float
    launch_s: float  # kernels x per-kernel launch cost
    flops: float
    bytes: float
    moe_layer_s: float  # one MoE layer without its attention kernel and all-to-all (for two-batch overlap)
    moe_layer_compute_s: float  # the compute-bound part of moe_layer_s
    moe_a2a_s: float  # one MoE layer's dispatch and combine
    moe_launch_s: float  # one MoE layer's launches


@dataclass(frozen=True, slots=True)
class OpRates:
    """Achieved rates of one GPU for one weight dtype: datasheet peak x fitted fraction."""

    gemm_flops: float
    gemm_Bps: float
    gemm_blend: float
    attention_flops: float
    attention_half_tokens: float
    decode_attention_Bps: float
    elementwise_Bps: float

    @classmethod
    def of(cls, gpu: GpuProfile, weight_dtype: str) -> OpRates:
        e = gpu.efficiency
        peak, hbm = gpu.peak_flops(weight_dtype), gpu.hbm_bandwidth_Bps
        fp8 = weight_dtype == "fp8" and gpu.dense_fp8_flops is not None and e.fp8_gemm_compute_fraction is not None
        compute, bandwidth, blend = (
            (e.fp8_gemm_compute_fraction, e.fp8_gemm_bandwidth_fraction, e.fp8_gemm_blend_exponent) if fp8
            else (e.gemm_compute_fraction, e.gemm_bandwidth_fraction, e.gemm_blend_exponent)
        )
        return cls(
            gemm_flops=peak * compute.value,
            gemm_Bps=hbm * bandwidth.value,
            gemm_blend=blend.value,
            attention_flops=gpu.dense_bf16_flops * e.attention_compute_fraction.value,  # attention runs in bf16
            attention_half_tokens=e.attention_half_tokens.value,
            decode_attention_Bps=hbm * e.attention_decode_bandwidth_fraction.value,
            elementwise_Bps=hbm * e.elementwise_bandwidth_fraction.value,
        )


# One op's cost: (compute_s, memory_s, flops, bytes). Its time is max(compute_s, memory_s),
# except GEMMs, whose time is the smooth max below.
Cost = tuple[float, float, float, float]


def gemm_cost(rates: OpRates, m: float, k: int, n: int, weight_bytes: int) -> Cost:
    """docs/roofline.md §GEMM."""
    flops = 2.0 * m * k * n
    moved = k * n * weight_bytes + (m * k + m * n) * ACTIVATION_BYTES
    return flops / rates.gemm_flops, moved / rates.gemm_Bps, flops, moved


def gemm_seconds(rates: OpRates, compute_s: float, memory_s: float) -> float:
    p = rates.gemm_blend
    return (compute_s**p + memory_s**p) ** (1.0 / p)


def prefill_attention_cost(rates: OpRates, pairs: float, flops_per_pair: int, moved: float) -> Cost:
    """Flash attention over `pairs` (query, cache entry) pairs; docs/roofline.md §Attention."""
    flops = pairs * flops_per_pair
    equal_work_length = math.sqrt(2.0 * pairs)  # the causal prefill length with as many pairs
    efficiency = equal_work_length / (equal_work_length + rates.attention_half_tokens)
    return flops / (rates.attention_flops * efficiency), moved / rates.decode_attention_Bps, flops, moved


def decode_attention_cost(rates: OpRates, entries: float, flops_per_pair: int, moved: float) -> Cost:
    flops = entries * flops_per_pair
    return flops / rates.attention_flops, moved / rates.decode_attention_Bps, flops, moved


def elementwise_cost(rates: OpRates, moved: float) -> Cost:
    return 0.0, moved / rates.elementwise_Bps, 0.0, moved


def expected_distinct_experts(routed_experts: int, experts_per_token: int, tokens: int) -> float:
    """docs/roofline.md §MoE: E * (1 - (1 - k/E)^N)."""
    return routed_experts * (1.0 - (1.0 - experts_per_token / routed_experts) ** tokens)


class Tally:
    """Adds op costs into the three buckets of docs/roofline.md §Step."""

    __slots__ = ("compute_s", "memory_s", "flops", "bytes")

    def __init__(self) -> None:
        self.compute_s = self.memory_s = self.flops = self.bytes = 0.0

    def add(self, cost: Cost, times: float = 1.0, seconds: float | None = None) -> None:
        compute_s, memory_s, flops, moved = cost
        op_s = max(compute_s, memory_s) if seconds is None else seconds
        if compute_s >= memory_s:
            self.compute_s += op_s * times
        else:
            self.memory_s += op_s * times
        self.flops += flops * times
        self.bytes += moved * times

    def add_tally(self, other: Tally, times: float = 1.0) -> None:
        self.compute_s += other.compute_s * times
        self.memory_s += other.memory_s * times
        self.flops += other.flops * times
        self.bytes += other.bytes * times

    def add_gemm(self, rates: OpRates, m: float, gemm: Gemm, weight_bytes: int, times: float = 1.0) -> None:
        cost = gemm_cost(rates, m, gemm.k, gemm.n, weight_bytes)
        self.add(cost, times, gemm_seconds(rates, cost[0], cost[1]))
