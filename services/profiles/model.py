"""What a model is to the emulator: its architecture, and the sizes derived from it.

The YAML holds only the architecture (as in the published configs); parameter
counts, weight bytes, FLOPs and KV bytes per token are computed here, so a
number cannot drift away from the shape it belongs to (docs/roofline.md §Shapes).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

_FROZEN = ConfigDict(frozen=True, extra="forbid")
DTYPE_BYTES = {"bf16": 2, "fp8": 1}
Dtype = Literal["bf16", "fp8"]


class MlaAttention(BaseModel):
    """Multi-head latent attention: the cache holds one compressed latent per entry, not per-head K and V."""

    model_config = _FROZEN
    q_lora_rank: int | None = Field(description="rank of the query down-projection; None: plain query projection")
    kv_lora_rank: int = Field(gt=0, description="width of the cached KV latent")
    qk_nope_head_dim: int = Field(gt=0, description="per-head query/key width without rotary part")
    qk_rope_head_dim: int = Field(gt=0, description="rotary key width, cached beside the latent")
    v_head_dim: int = Field(gt=0, description="per-head value width")
    sequence_compression: int = Field(1, ge=1, description="tokens folded into one cached latent entry")


class MoeMlp(BaseModel):
    model_config = _FROZEN
    routed_experts: int = Field(gt=0, description="experts the router chooses from")
    shared_experts: int = Field(ge=0, description="experts every token passes through")
    experts_per_token: int = Field(gt=0, description="routed experts active per token")
    expert_intermediate_size: int = Field(gt=0, description="intermediate width of one expert's SwiGLU")
    first_dense_layers: int = Field(ge=0, description="leading layers with a dense MLP instead of experts")
    expert_groups: int = Field(1, ge=1, description=(
        "groups the experts are split into for node-limited routing (DeepSeek-V3's n_group); 1: no groups"))
    groups_per_token: int = Field(1, ge=1, description=(
        "groups a token's experts may come from (DeepSeek-V3's topk_group); docs/roofline.md §Expert dispatch"))

    @model_validator(mode="after")
    def _groups(self) -> "MoeMlp":
        if self.routed_experts % self.expert_groups or self.groups_per_token > self.expert_groups:
            raise ValueError("expert_groups must divide routed_experts and be at least groups_per_token")
        return self


class ModelProfile(BaseModel):
    model_config = _FROZEN

    name: str = Field(description="profile name, e.g. 'llama3-8b'")
    description: str = Field(description="what the model is and which published config it follows")
    num_layers: int = Field(gt=0, description="decoder layers")
    hidden_size: int = Field(gt=0)
    num_attention_heads: int = Field(gt=0)
    num_kv_heads: int | None = Field(None, gt=0, description="GQA key/value heads; None for MLA")
    head_dim: int | None = Field(None, gt=0, description="GQA head width; None for MLA")
    intermediate_size: int = Field(gt=0, description="SwiGLU width of the dense MLP layers")
    vocab_size: int = Field(gt=0)
    max_context: int = Field(gt=0, description="longest sequence (prompt + output) in tokens")
    dtype: Dtype = Field(description="weight dtype; fp8 weights also select the GPU's fp8 tensor rate")
    kv_dtype: Dtype = Field("bf16", description="dtype of the cached keys and values")
    tie_word_embeddings: bool = Field(False, description="LM head shares the embedding table")
    attention_bias: bool = Field(False, description="q/k/v projections carry a bias (Qwen2)")
    mla: MlaAttention | None = None
    moe: MoeMlp | None = None

    @model_validator(mode="after")
    def _consistent(self) -> ModelProfile:
        if self.mla is None and (self.num_kv_heads is None or self.head_dim is None):
            raise ValueError("a GQA model needs num_kv_heads and head_dim")
        if self.mla is not None and (self.num_kv_heads is not None or self.head_dim is not None):
            raise ValueError("an MLA model sets mla widths instead of num_kv_heads and head_dim")
        if self.mla is not None and self._kv_bytes_per_entry * self.num_layers % self.mla.sequence_compression:
            raise ValueError("KV bytes per token must come out whole: adjust sequence_compression")
        if self.moe is not None and self.moe.first_dense_layers > self.num_layers:
            raise ValueError("first_dense_layers exceeds num_layers")
        return self

    # --- layer composition -------------------------------------------------
    @property
    def moe_layers(self) -> int:
        return 0 if self.moe is None else self.num_layers - self.moe.first_dense_layers

    @property
    def dense_layers(self) -> int:
        return self.num_layers - self.moe_layers

    # --- parameters (docs/roofline.md §Shapes) -----------------------------
    @property
    def attention_params_per_layer(self) -> int:
        h, heads = self.hidden_size, self.num_attention_heads
        if self.mla is None:
            qkv_width = (heads + 2 * self.num_kv_heads) * self.head_dim
            bias = qkv_width if self.attention_bias else 0
            return h * qkv_width + bias + heads * self.head_dim * h
        m = self.mla
        qk_width = heads * (m.qk_nope_head_dim + m.qk_rope_head_dim)
        query = h * qk_width if m.q_lora_rank is None else h * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * qk_width
        latent = h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank
        up = m.kv_lora_rank * heads * (m.qk_nope_head_dim + m.v_head_dim)
        return query + latent + up + heads * m.v_head_dim * h

    @property
    def dense_mlp_params(self) -> int:
        return 3 * self.hidden_size * self.intermediate_size

    @property
    def expert_params(self) -> int:
        return 0 if self.moe is None else 3 * self.hidden_size * self.moe.expert_intermediate_size

    def _moe_mlp_params(self, experts: int) -> int:
        router = self.moe.routed_experts * self.hidden_size
        return (experts + self.moe.shared_experts) * self.expert_params + router

    @property
    def embedding_params(self) -> int:
        return self.vocab_size * self.hidden_size

    def _params(self, routed_experts_counted: int) -> int:
        per_layer_common = self.attention_params_per_layer + 2 * self.hidden_size  # + two RMSNorms
        mlps = self.dense_layers * self.dense_mlp_params
        if self.moe is not None:
            mlps += self.moe_layers * self._moe_mlp_params(routed_experts_counted)
        lm_head = 0 if self.tie_word_embeddings else self.embedding_params
        return self.num_layers * per_layer_common + mlps + self.embedding_params + lm_head + self.hidden_size

    @property
    def total_params(self) -> int:
        return self._params(self.moe.routed_experts if self.moe else 0)

    @property
    def active_params(self) -> int:
        """Parameters one token passes through (only its routed experts count)."""
        return self._params(self.moe.experts_per_token if self.moe else 0)

    @property
    def weight_bytes(self) -> int:
        return self.total_params * DTYPE_BYTES[self.dtype]

    # --- KV cache and FLOPs (docs/roofline.md §Attention, §MLA) ------------
    @property
    def _kv_bytes_per_entry(self) -> int:
        """Bytes one layer stores per cache entry."""
        if self.mla is None:
            return 2 * self.num_kv_heads * self.head_dim * DTYPE_BYTES[self.kv_dtype]
        return (self.mla.kv_lora_rank + self.mla.qk_rope_head_dim) * DTYPE_BYTES[self.kv_dtype]

    @property
    def kv_sequence_compression(self) -> int:
        return 1 if self.mla is None else self.mla.sequence_compression

    @property
    def kv_bytes_per_token(self) -> int:
        """KV-cache bytes one token adds across all layers: what fills HBM and crosses the WAN."""
        return self._kv_bytes_per_entry * self.num_layers // self.kv_sequence_compression

    @property
    def matmul_flops_per_token(self) -> int:
        """2 x active parameters, less the embedding lookup (a gather, no multiply)."""
        return 2 * (self.active_params - self.embedding_params)

    def attention_flops_per_token(self, context_tokens: int) -> int:
        """Score and value FLOPs of one new token attending over `context_tokens`, all layers."""
        if self.mla is None:
            per_entry = 4 * self.num_attention_heads * self.head_dim
        else:
            m = self.mla
            per_entry = 2 * self.num_attention_heads * (m.qk_nope_head_dim + m.qk_rope_head_dim + m.v_head_dim)
        return self.num_layers * per_entry * context_tokens // self.kv_sequence_compression

    def flops_per_token(self, context_tokens: int = 0) -> int:
        return self.matmul_flops_per_token + self.attention_flops_per_token(context_tokens)

    def tensor_parallel_degrees(self) -> list[int]:
        """TP degrees that split the attention heads evenly (KV heads split or replicate)."""
        heads, kv = self.num_attention_heads, self.num_kv_heads
        return [d for d in range(1, heads + 1) if heads % d == 0 and (kv is None or kv % d == 0 or d % kv == 0)]
