"""How an instance's GPUs split a model, and what its collectives cost (docs/roofline.md §Parallelism).

    p = Parallelism(tp=16, dp_attention=16, ep=16)   # DeepSeek-V3 / SGLang large-scale layout
    p.kv_replicas(model), p.weight_bytes(model)        # memory (docs/engine.md, "Capacity")
    allreduce_seconds(gpu, 8, payload_bytes)           # NVLink inside a node, the NIC across nodes

`tp` GPUs form one instance. Attention runs tensor-parallel over `tp / dp_attention`
GPUs, `dp_attention` such groups each serving its own sequences (SGLang's
--enable-dp-attention), so an MLA latent is held once per group instead of on every
GPU. The routed experts are tensor-parallel over all `tp` GPUs (`ep == 1`) or spread
whole across them (`ep == tp`, SGLang's DeepEP layout), with a dispatch and a combine
per MoE layer (expert_dispatch.py). Any `ep` works: EPLB's redundant experts fill the
slots the routed experts leave, `expert_imbalance` slows every GPU to the busiest one,
`dense_dp` runs the dense layers and the LM head data-parallel, and `tbo` overlaps two
micro-batches (overlap.py), on by default wherever DeepEP runs (ep > 1).
"""

from __future__ import annotations

from dataclasses import dataclass

from services.profiles.gpu import GpuProfile
from services.profiles.model import DTYPE_BYTES, ModelProfile



@dataclass(frozen=True, slots=True)
class Parallelism:
    tp: int = 1
    dp_attention: int = 1
    ep: int = 1
    redundant_experts: int | None = None  # None: the fewest that fill every GPU's slots evenly
    expert_imbalance: float = 1.0  # busiest GPU's routed tokens / the mean (1.0: perfectly balanced)
    dense_dp: bool = False  # dense MLPs and LM head data-parallel (SGLang --moe-dense-tp-size 1)
    tbo: bool | None = None  # None: on with EP (two-batch overlap, as DeepEP deployments run it)

    def __post_init__(self) -> None:
        for name in ("tp", "dp_attention", "ep"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.tp % self.dp_attention:
            raise ValueError(f"dp_attention={self.dp_attention} must divide tp={self.tp}")
        if self.ep not in (1, self.tp):
            raise ValueError(
                f"ep={self.ep} must be 1 (experts tensor-parallel) or tp={self.tp} (whole experts per GPU)"
            )
        if self.expert_imbalance < 1.0:
            raise ValueError(f"expert_imbalance={self.expert_imbalance} must be at least 1.0 (busiest GPU / mean)")
        if self.redundant_experts is not None and (self.redundant_experts < 0 or self.ep == 1):
            raise ValueError("redundant_experts must be 0 or more, and needs ep > 1")

    @property
    def attention_tp(self) -> int:
        return self.tp // self.dp_attention

    @property
    def dense_data_parallel(self) -> bool:
        """Dense MLPs and the LM head on every GPU for its own tokens (docs/roofline.md §Parallelism)."""
        return self.dense_dp and self.tp > 1

    @property
    def two_batch_overlap(self) -> bool:
        return self.tbo if self.tbo is not None else self.ep > 1

    def expert_slots(self, model: ModelProfile) -> int:
        """Routed experts each GPU holds: the logical ones plus EPLB's replicas, spread evenly."""
        experts = model.moe.routed_experts
        if self.ep == 1:
            return experts
        redundant = self.redundant_experts if self.redundant_experts is not None else -experts % self.ep
        return (experts + redundant) // self.ep

    def check(self, model: ModelProfile) -> None:
        """Refuse layouts the model cannot take, naming the valid choices."""
        if self.ep > 1 and model.moe is None:
            raise ValueError(f"ep={self.ep} needs an MoE model; {model.name} is dense")
        if self.redundant_experts is not None and (model.moe.routed_experts + self.redundant_experts) % self.ep:
            least = -model.moe.routed_experts % self.ep
            raise ValueError(
                f"{model.moe.routed_experts} experts + {self.redundant_experts} redundant do not fill ep={self.ep} "
                f"GPUs evenly; use {least}, {least + self.ep}, ... redundant experts"
            )

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
        if self.ep > 1:  # router and shared experts run data-parallel on every GPU, plus EPLB's replicas
            shared = model.moe.shared_experts * model.expert_params + model.moe.routed_experts * model.hidden_size
            extra += (self.tp - 1) * model.moe_layers * shared
            replicas = self.expert_slots(model) * self.ep - model.moe.routed_experts
            extra += replicas * model.moe_layers * model.expert_params
        if self.dense_data_parallel:  # whole dense MLPs and LM head on every GPU
            extra += (self.tp - 1) * (model.dense_layers * model.dense_mlp_params + model.embedding_params)
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
