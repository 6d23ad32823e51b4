"""How an instance's GPUs split a model, and what its collectives cost (docs/roofline.md §Parallelism).

    p = Parallelism(tp=16, dp_attention=16, ep=16)   # DeepSeek-V3 / SGLang large-scale layout
    p.kv_replicas(model), p.weight_bytes(model)        # memory (docs/engine.md, "Capacity")
    allreduce_seconds(gpu, 8, payload_bytes)           # NVLink inside a node, the NIC across nodes

`tp` GPUs form one instance. Attention runs tensor-parallel over `tp / dp_attention`
GPUs, `dp_attention` such groups each serving its own sequences (SGLang's
--enable-dp-attention), so an MLA latent is held once per group instead of on every
GPU. The routed experts are tensor-parallel over all `tp` GPUs (`ep == 1`) or spread
whole across them (`ep == tp`, SGLang's DeepEP layout), with a dispatch and a combine
all-to-all per MoE layer.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.profiles.gpu import GpuProfile
from services.profiles.model import DTYPE_BYTES, ModelProfile

DISPATCH_BYTES = 1  # DeepEP dispatches fp8 activations (with per-block scales, ignored here)
COMBINE_BYTES = 2  # and combines in bf16


@dataclass(frozen=True, slots=True)
class Parallelism:
    tp: int = 1
    dp_attention: int = 1
    ep: int = 1

    def __post_init__(self) -> None:
        for name in ("tp", "dp_attention", "ep"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.tp % self.dp_attention:
            raise ValueError(f"dp_attention={self.dp_attention} must divide tp={self.tp}")
        if self.ep not in (1, self.tp):
            raise ValueError(f"ep={self.ep} must be 1 (experts tensor-parallel) or tp={self.tp} (one expert group per GPU)")

    @property
    def attention_tp(self) -> int:
        return self.tp // self.dp_attention

    def check(self, model: ModelProfile) -> None:
        """Refuse layouts the model cannot take, naming the valid choices."""
        if self.ep > 1 and model.moe is None:
            raise ValueError(f"ep={self.ep} needs an MoE model; {model.name} is dense")
        if self.ep > 1 and model.moe.routed_experts % self.ep:
            raise ValueError(f"ep={self.ep} does not split {model.name}'s {model.moe.routed_experts} experts evenly")

    def kv_replicas(self, model: ModelProfile) -> int:
        """Copies of each KV entry an instance holds (docs/engine.md, "Capacity").

        GQA shards KV heads across an attention group until it has more GPUs than heads; MLA's
        latent is not split by head, so every GPU of the group keeps all of it.
        """
        if model.mla is not None:
            return self.attention_tp
        return max(1, self.attention_tp // model.num_kv_heads)

    def weight_bytes(self, model: ModelProfile) -> int:
        """Weights the instance stores: one copy, plus what data parallelism replicates."""
        w = DTYPE_BYTES[model.dtype]
        per_layer_attention = model.attention_params_per_layer + 2 * model.hidden_size
        extra = (self.dp_attention - 1) * model.num_layers * per_layer_attention  # one copy per attention group
        if self.ep > 1:  # router and shared experts run data-parallel on every GPU
            shared = model.moe.shared_experts * model.expert_params + model.moe.routed_experts * model.hidden_size
            extra += (self.tp - 1) * model.moe_layers * shared
        return model.weight_bytes + extra * w


def _split(gpu: GpuProfile, group: int) -> tuple[int, int]:
    """(GPUs per node in the group, nodes the group spans)."""
    local = min(group, gpu.gpus_per_node)
    return local, -(-group // local)


def _nic_Bps(gpu: GpuProfile) -> float:
    return gpu.nic_bandwidth_bps / 8  # bits to bytes; one NIC per GPU


def _latency(gpu: GpuProfile, nodes: int) -> float:
    return gpu.allreduce_latency_s.value if nodes == 1 else gpu.nic_latency_s.value


def allreduce_seconds(gpu: GpuProfile, group: int, payload_bytes: float) -> float:
    """Hierarchical ring all-reduce, as NCCL runs it over NVLink inside nodes and one NIC per GPU across.

    latency + 2 (l - 1) / l x S / nvlink + 2 (N - 1) / N x (S / l) / nic: each GPU's NIC carries the
    inter-node reduction of its 1/l slice (l GPUs per node, N nodes).
    """
    if group == 1:
        return 0.0
    local, nodes = _split(gpu, group)
    intra = 2 * (local - 1) / local * payload_bytes / gpu.interconnect_bandwidth_Bps
    inter = 2 * (nodes - 1) / nodes * payload_bytes / local / _nic_Bps(gpu)
    return _latency(gpu, nodes) + intra + inter


def allgather_seconds(gpu: GpuProfile, group: int, gathered_bytes: float) -> float:
    """All-gather (or reduce-scatter) of `gathered_bytes` in all: half the traffic of an all-reduce."""
    if group == 1:
        return 0.0
    local, nodes = _split(gpu, group)
    intra = (local - 1) / local * gathered_bytes / gpu.interconnect_bandwidth_Bps
    inter = (nodes - 1) / nodes * gathered_bytes / local / _nic_Bps(gpu)
    return _latency(gpu, nodes) + intra + inter


def alltoall_seconds(gpu: GpuProfile, group: int, sent_bytes: float) -> float:
    """Each GPU spreads `sent_bytes` evenly over the group; its NVLink and NIC shares move in parallel (DeepEP)."""
    if group == 1:
        return 0.0
    local, nodes = _split(gpu, group)
    intra = sent_bytes * (local - 1) / group / gpu.interconnect_bandwidth_Bps
    inter = sent_bytes * (group - local) / group / _nic_Bps(gpu)
    return _latency(gpu, nodes) + max(intra, inter)
