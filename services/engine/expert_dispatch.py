"""What an MoE layer's dispatch and combine cost with DeepEP (docs/roofline.md §Expert dispatch).

    d = ExpertDispatch.of(gpu, model, ep=32, imbalance=1.0)
    d.seconds(local_tokens=16384, mode=DispatchMode.NORMAL)       # prefill: node-limited, deduplicated
    d.seconds(local_tokens=128, mode=DispatchMode.LOW_LATENCY)    # decode: one copy per routed expert

Normal kernels send a token once to each node that holds one of its experts (at most
`groups_per_token` nodes under DeepSeek's node-limited routing) over RDMA and forward it
over NVLink to the GPUs of that node; low-latency kernels send one copy per routed expert
straight over RDMA. Both dispatch fp8 (with one fp32 scale per 128 values) and combine bf16.
The achieved rates come from DeepEP's published H800 + CX7 measurements (DeepEP docs/legacy.md,
§Performance), applied as fractions of each GPU's own NIC and NVLink.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from itertools import combinations

from services.profiles.gpu import GpuProfile
from services.profiles.model import ModelProfile

DISPATCH_BYTES_PER_VALUE = 1 + 4 / 128  # fp8 values plus one fp32 scale per 128 (DeepEP's fp8 dispatch)
COMBINE_BYTES_PER_VALUE = 2  # bf16

# Normal kernels, internode (DeepEP legacy table, H800 + CX7 400 Gb/s, ~50 GB/s): 58 GB/s at EP32 and 51 GB/s
# at EP64 of "logical" RDMA bytes, which count a token's own node too; its remote share is 3/4 at EP32 (4 nodes)
# and about 7/8 at EP64 (4 of 8 nodes), so the NIC carries 43.5 and 44.6 GB/s: 0.88 of its rate.
NORMAL_NIC_FRACTION = 0.88
# Normal kernels, intranode: 153-158 GB/s of the H800's ~160 GB/s NVLink (the same table).
NVLINK_FRACTION = 0.96
# Low-latency kernels (the same README, 128 tokens per GPU): a least-squares line through the 8 dispatch and
# combine rows of EP32-256 gives 18 us plus all copies' bytes at 47.2 GB/s, 0.94 of the NIC.
LOW_LATENCY_S = 18e-6
LOW_LATENCY_NIC_FRACTION = 0.94


class DispatchMode(enum.Enum):
    NORMAL = "normal"  # prefill and extend steps (eager)
    LOW_LATENCY = "low-latency"  # decode steps (CUDA graph)


def expected_bins_touched(experts: int, groups: int, groups_per_token: int, picks: int, bins: int) -> float:
    """Expected distinct bins (nodes or GPUs) a token's `picks` experts land in.

    Experts lie evenly and in order over `bins`; the token's experts come from `groups_per_token` of `groups`
    equal groups chosen uniformly, each expert uniformly among the chosen groups' experts (with replacement,
    which is close for 8 picks out of 64 or more).
    """
    per_bin, per_group = experts / bins, experts / groups
    choices = list(combinations(range(groups), groups_per_token))
    total = 0.0
    for chosen in choices:
        pool = groups_per_token * per_group
        for b in range(bins):
            lo, hi = b * per_bin, (b + 1) * per_bin
            in_bin = sum(max(0.0, min(hi, (g + 1) * per_group) - max(lo, g * per_group)) for g in chosen)
            total += 1.0 - (1.0 - in_bin / pool) ** picks
    return total / len(choices)


@dataclass(frozen=True, slots=True)
class ExpertDispatch:
    """Per-GPU seconds of one MoE layer's dispatch plus combine, for `local_tokens` tokens on each GPU."""

    gpu: GpuProfile
    hidden: int
    experts_per_token: int
    ep: int
    nodes: int
    local_gpus: int
    remote_nodes_per_token: float  # nodes other than the token's own its experts sit on
    gpus_per_token: float  # distinct GPUs its experts sit on
    imbalance: float

    @classmethod
    def of(cls, gpu: GpuProfile, model: ModelProfile, ep: int, imbalance: float = 1.0) -> ExpertDispatch:
        moe = model.moe
        local = min(ep, gpu.gpus_per_node)
        nodes = -(-ep // local)
        groups, chosen = moe.expert_groups, moe.groups_per_token
        nodes_touched = expected_bins_touched(moe.routed_experts, groups, chosen, moe.experts_per_token, nodes)
        own_node = nodes_touched / nodes  # the token's own node is one of the nodes, alike to the others
        gpus_touched = expected_bins_touched(moe.routed_experts, groups, chosen, moe.experts_per_token, ep)
        return cls(gpu, model.hidden_size, moe.experts_per_token, ep, nodes, local,
                   nodes_touched - own_node, gpus_touched, imbalance)

    def seconds(self, local_tokens: float, mode: DispatchMode) -> float:
        if self.ep == 1 or local_tokens <= 0:
            return 0.0
        values = local_tokens * self.hidden * self.imbalance  # the busiest GPU sets the pace
        per_value = DISPATCH_BYTES_PER_VALUE + COMBINE_BYTES_PER_VALUE
        nvlink_Bps = self.gpu.interconnect_bandwidth_Bps * NVLINK_FRACTION
        nic_Bps = self.gpu.nic_bandwidth_bps / 8
        if mode is DispatchMode.LOW_LATENCY:
            copies_bytes = values * self.experts_per_token * per_value
            if self.nodes == 1:  # inside one node the copies travel over NVLink
                return 2 * LOW_LATENCY_S + copies_bytes * (self.local_gpus - 1) / self.local_gpus / nvlink_Bps
            return 2 * LOW_LATENCY_S + copies_bytes / (nic_Bps * LOW_LATENCY_NIC_FRACTION)
        # normal: once per remote node over RDMA, then to each GPU holding an expert over NVLink
        forwarded = values * self.gpus_per_token * (self.local_gpus - 1) / self.local_gpus * per_value
        nvlink_s = forwarded / nvlink_Bps
        rdma_s = values * self.remote_nodes_per_token * per_value / (nic_Bps * NORMAL_NIC_FRACTION)
        latency = self.gpu.allreduce_latency_s.value if self.nodes == 1 else self.gpu.nic_latency_s.value
        return 2 * latency + max(nvlink_s, rdma_s)
