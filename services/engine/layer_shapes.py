"""The shapes of a decoder layer's ops on one GPU, per (model, tensor-parallel degree).

Computed once, so the clock's hot path only multiplies by token counts; the op list mirrors
the PyTorch layer the constants were fitted on (docs/roofline.md §Shapes). What each op costs
is in roofline_ops.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.engine.roofline_ops import ACTIVATION_BYTES
from services.profiles.model import DTYPE_BYTES, ModelProfile


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
class ContiguousPrefill:
    """Kernels an fp8 MoE layer adds in an expert-parallel prefill (docs/roofline.md §Expert-parallel prefill).

    SGLang's normal-dispatch path (DeepEPMoE.forward_deepgemm_contiguous, the dispatcher's dispatch_a)
    quantises every fp8 GEMM's input in its own kernel and permutes the dispatched tokens into
    DeepGEMM's contiguous layout; the low-latency (decode) path fuses both into other kernels.
    """

    attention_bytes_per_token: float  # quantising the attention projections' inputs (each attention token)
    moe_bytes_per_token: float  # pre-dispatch and shared-expert quantisation, permutation, down-input quantisation
    attention_kernels: int
    moe_kernels: int


@dataclass(frozen=True, slots=True)
class LayerShapes:
    attention: AttentionShape
    dense_mlp: MlpShape
    moe_mlp: MlpShape | None
    allreduce_bytes_per_token: int  # per all-reduce; two per layer (docs/roofline.md §Tensor parallelism)
    contiguous_prefill: ContiguousPrefill | None = None  # fp8 MoE with ep > 1 only


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


# per-token-group fp8 quantisation: read a bf16 value, write it in fp8 with one fp32 scale per 128 values
QUANT_BYTES_PER_VALUE = ACTIVATION_BYTES + 1 + 4 / 128
FP8_ROW_BYTES_PER_VALUE = 1 + 4 / 128  # a dispatched token: fp8 values and their scales


def _contiguous_prefill(model: ModelProfile, attention: AttentionShape, ep: int) -> ContiguousPrefill | None:
    if model.moe is None or ep == 1 or model.dtype != "fp8":
        return None
    moe, h = model.moe, model.hidden_size
    attention_inputs = set(g.k for g in attention.gemms)  # projections of one input share its quantisation
    shared_inter = moe.shared_experts * moe.expert_intermediate_size
    k, inter = moe.experts_per_token, moe.expert_intermediate_size
    moe_values = h + (h + shared_inter if shared_inter else 0) + k * inter  # pre-dispatch, shared, down inputs
    permute = 2 * k * h * FP8_ROW_BYTES_PER_VALUE  # each routed copy read and written into its expert's rows
    return ContiguousPrefill(
        attention_bytes_per_token=sum(attention_inputs) * QUANT_BYTES_PER_VALUE,
        moe_bytes_per_token=moe_values * QUANT_BYTES_PER_VALUE + permute,
        attention_kernels=len(attention_inputs),
        moe_kernels=1 + (2 if shared_inter else 0) + 1 + 1,  # pre-dispatch, shared experts, permutation, down
    )


def layer_shapes(model: ModelProfile, tp: int, attention_tp: int | None = None, ep: int = 1,
                 dense_dp: bool = False) -> LayerShapes:
    """One GPU's shapes: attention split over `attention_tp` GPUs (default tp), MLPs over tp (docs/roofline.md).

    With `dense_dp` the dense MLPs are whole on every GPU, which runs them on its own tokens.
    """
    attention_tp = tp if attention_tp is None else attention_tp
    if attention_tp not in model.tensor_parallel_degrees():
        choices = ", ".join(map(str, model.tensor_parallel_degrees()))
        kv_heads = "" if model.num_kv_heads is None else f" and {model.num_kv_heads} KV heads"
        raise ValueError(
            f"tp={attention_tp} does not split {model.name}'s {model.num_attention_heads} attention heads{kv_heads} "
            f"evenly; use one of {choices} (with dp_attention, tp / dp_attention)"
        )
    attention = _gqa_attention(model, attention_tp) if model.mla is None else _mla_attention(model, attention_tp)
    return LayerShapes(
        attention=attention,
        dense_mlp=_dense_mlp(model, 1 if dense_dp else tp),
        moe_mlp=_moe_mlp(model, tp, ep),
        allreduce_bytes_per_token=model.hidden_size * ACTIVATION_BYTES,
        contiguous_prefill=_contiguous_prefill(model, attention, ep),
    )
