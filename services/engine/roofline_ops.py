"""The ops of a decoder layer: their shapes on one GPU, and what each op costs.

Shapes are computed once per (model, tensor-parallel degree) so the clock's
hot path only multiplies by token counts; the op list mirrors the PyTorch
layer the constants were fitted on (docs/roofline.md §Shapes). Each op is its
own roofline at the achieved rates of `OpRates`; calibration fits those rates
through the same functions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from services.profiles.gpu import GpuProfile
from services.profiles.model import DTYPE_BYTES, ModelProfile

ACTIVATION_BYTES = 2  # bf16 activations whatever the weight dtype


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
        return cls(
            gemm_flops=peak * e.gemm_compute_fraction.value,
            gemm_Bps=hbm * e.gemm_bandwidth_fraction.value,
            gemm_blend=e.gemm_blend_exponent.value,
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


@dataclass(frozen=True, slots=True)
class Gemm:
    """y[M, n] = x[M, k] @ W[k, n] for M tokens; W holds k*n parameters."""

    k: int
    n: int


@dataclass(frozen=True, slots=True)
class MlpShape:
    gemms: tuple[Gemm, ...]  # every token passes through these (dense MLP, shared experts, router)
    elementwise_bytes_per_token: int
    kernels: int
    routed_experts: int = 0  # docs/roofline.md §MoE
    experts_per_token: int = 0
    expert_gemms: tuple[Gemm, ...] = ()  # one routed expert's gate-up and down


@dataclass(frozen=True, slots=True)
class AttentionShape:
    """The attention half of a layer; the two RMSNorms and residual adds are counted here too."""

    gemms: tuple[Gemm, ...]
    elementwise_bytes_per_token: int  # norms, residual adds, output copy, cache write
    kernels: int
    kv_entry_bytes: int  # one layer's cache entry on this GPU (docs/roofline.md §Attention)
    kv_sequence_compression: int  # tokens per cache entry
    prefill_flops_per_pair: int  # per (query token, cache entry) and layer
    decode_flops_per_pair: int  # MLA decodes in the absorbed form (docs/roofline.md §MLA)
    query_output_bytes_per_token: int


@dataclass(frozen=True, slots=True)
class LayerShapes:
    attention: AttentionShape
    dense_mlp: MlpShape
    moe_mlp: MlpShape | None
    allreduce_bytes_per_token: int  # per all-reduce; two per layer (docs/roofline.md §Tensor parallelism)


# two RMSNorms (read and write the hidden state) and two residual adds (read two, write one)
_NORMS_AND_RESIDUALS = (2 * 2 + 2 * 3) * ACTIVATION_BYTES  # per hidden unit and token


def _gqa_attention(model: ModelProfile, tp: int) -> AttentionShape:
    h, heads, d = model.hidden_size, model.num_attention_heads // tp, model.head_dim
    kv_heads = max(1, model.num_kv_heads // tp)  # replicated when tp exceeds the KV heads
    entry = 2 * kv_heads * d * DTYPE_BYTES[model.kv_dtype]
    output_copy = 2 * heads * d * ACTIVATION_BYTES  # heads back into one row before the O projection
    return AttentionShape(
        gemms=(Gemm(h, (heads + 2 * kv_heads) * d), Gemm(heads * d, h)),
        elementwise_bytes_per_token=_NORMS_AND_RESIDUALS * h + output_copy + 2 * entry,  # cache write: read + write
        kernels=2 + 2 + 2 + 1 + 1 + 2,  # GEMMs, norms, adds, attention, output copy, K and V cache writes
        kv_entry_bytes=entry,
        kv_sequence_compression=1,
        prefill_flops_per_pair=4 * heads * d,
        decode_flops_per_pair=4 * heads * d,
        query_output_bytes_per_token=2 * heads * d * ACTIVATION_BYTES,
    )


def _mla_attention(model: ModelProfile, tp: int) -> AttentionShape:
    """docs/roofline.md §MLA."""
    h, heads, m = model.hidden_size, model.num_attention_heads // tp, model.mla
    qk, latent = m.qk_nope_head_dim + m.qk_rope_head_dim, m.kv_lora_rank + m.qk_rope_head_dim
    if m.q_lora_rank is None:
        query = (Gemm(h, heads * qk),)
    else:
        query = (Gemm(h, m.q_lora_rank), Gemm(m.q_lora_rank, heads * qk))
    entry = latent * DTYPE_BYTES[model.kv_dtype]  # the latent is whole on every GPU of the attention group
    lora_norms = 2 * ((m.q_lora_rank or 0) + m.kv_lora_rank) * ACTIVATION_BYTES
    output_copy = 2 * heads * m.v_head_dim * ACTIVATION_BYTES
    return AttentionShape(
        gemms=query + (Gemm(h, latent), Gemm(m.kv_lora_rank, heads * (m.qk_nope_head_dim + m.v_head_dim)),
                       Gemm(heads * m.v_head_dim, h)),
        elementwise_bytes_per_token=(
            _NORMS_AND_RESIDUALS * h + lora_norms + output_copy + 2 * entry // m.sequence_compression
        ),
        kernels=len(query) + 3 + 4 + 2 + 1 + 1 + 1,  # GEMMs, norms, adds, attention, output copy, cache write
        kv_entry_bytes=entry,
        kv_sequence_compression=m.sequence_compression,
        prefill_flops_per_pair=2 * heads * (qk + m.v_head_dim),
        decode_flops_per_pair=2 * heads * (latent + m.kv_lora_rank),
        query_output_bytes_per_token=heads * (qk + m.v_head_dim) * ACTIVATION_BYTES,
    )


def _swiglu_bytes(intermediate: int) -> int:
    # silu(gate) reads and writes I; the product reads 2I and writes I (two eager kernels)
    return 5 * intermediate * ACTIVATION_BYTES


def _dense_mlp(model: ModelProfile, tp: int) -> MlpShape:
    h, inter = model.hidden_size, model.intermediate_size // tp
    return MlpShape(
        gemms=(Gemm(h, 2 * inter), Gemm(inter, h)), elementwise_bytes_per_token=_swiglu_bytes(inter), kernels=4
    )


def _moe_mlp(model: ModelProfile, tp: int, ep: int = 1) -> MlpShape | None:
    """With ep > 1 the router and shared experts are whole on every GPU and each expert is whole on one."""
    if model.moe is None:
        return None
    moe, h = model.moe, model.hidden_size
    split = 1 if ep > 1 else tp
    expert_inter = moe.expert_intermediate_size // split
    shared_inter = moe.shared_experts * moe.expert_intermediate_size // split
    gemms = [Gemm(h, moe.routed_experts)]  # the router, replicated
    if shared_inter:
        gemms += [Gemm(h, 2 * shared_inter), Gemm(shared_inter, h)]
    # dispatch is fused into the expert GEMMs (their activation reads count it); combining reads the
    # k expert outputs of a token and writes one row
    combine_bytes = (moe.experts_per_token + 1) * h * ACTIVATION_BYTES
    return MlpShape(
        gemms=tuple(gemms),
        elementwise_bytes_per_token=(
            combine_bytes + _swiglu_bytes(shared_inter) + moe.experts_per_token * _swiglu_bytes(expert_inter)
        ),
        # router, top-k, sort, two expert GEMMs, activation, combine; the shared experts as a dense MLP
        kernels=1 + 1 + 1 + 2 + 2 + 1 + (4 if shared_inter else 0),
        routed_experts=moe.routed_experts,
        experts_per_token=moe.experts_per_token,
        expert_gemms=(Gemm(h, 2 * expert_inter), Gemm(expert_inter, h)),
    )


def layer_shapes(model: ModelProfile, tp: int, attention_tp: int | None = None, ep: int = 1) -> LayerShapes:
    """One GPU's shapes: attention split over `attention_tp` GPUs (default tp), MLPs over tp (docs/roofline.md)."""
    attention_tp = tp if attention_tp is None else attention_tp
    if attention_tp not in model.tensor_parallel_degrees():
        choices = ", ".join(map(str, model.tensor_parallel_degrees()))
        kv_heads = "" if model.num_kv_heads is None else f" and {model.num_kv_heads} KV heads"
        raise ValueError(
            f"tp={attention_tp} does not split {model.name}'s {model.num_attention_heads} attention heads{kv_heads} "
            f"evenly; use one of {choices} (with dp_attention, tp / dp_attention)"
        )
    return LayerShapes(
        attention=_gqa_attention(model, attention_tp) if model.mla is None else _mla_attention(model, attention_tp),
        dense_mlp=_dense_mlp(model, tp),
        moe_mlp=_moe_mlp(model, tp, ep),
        allreduce_bytes_per_token=model.hidden_size * ACTIVATION_BYTES,
    )


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

    def add_gemm(self, rates: OpRates, m: float, gemm: Gemm, weight_bytes: int, times: float = 1.0) -> None:
        cost = gemm_cost(rates, m, gemm.k, gemm.n, weight_bytes)
        self.add(cost, times, gemm_seconds(rates, cost[0], cost[1]))
