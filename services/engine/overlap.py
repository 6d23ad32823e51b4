"""Two-batch overlap: one micro-batch's dispatch and combine run under the other's compute.

DeepSeek's inference system and SGLang's `--enable-two-batch-overlap` split a step's batch
into two micro-batches and alternate them layer by layer, so that the all-to-all of one
hides behind the attention and expert GEMMs of the other (docs/roofline.md §Two-batch overlap):

    layer_s = 2 x max(comm_s, compute_s + sm_share x comm_s)       per MoE layer, each term for one micro-batch
    step_s  = sum over MoE layers of layer_s + min(comm_s, compute_s)   (the pipeline's fill)

`sm_share` is the part of the GPU the communication holds from compute while it runs: DeepEP's
normal kernels keep their SMs busy (24 of 132 in DeepEP's own example, `Buffer.set_num_sms(24)`);
its low-latency kernels take every SM while they send and receive and none while the RDMA is in
flight (DeepSeek profile-data README, "Decoding"; LMSYS large-scale EP post, "Detail Breakdown"),
and DeepEP's unit test occupies the SMs for 0.06 ms of a 0.17 ms dispatch (the same LMSYS post).
"""

from __future__ import annotations

from services.engine.expert_dispatch import DispatchMode
from services.profiles.gpu import GpuProfile

NORMAL_KERNEL_SMS = 24  # DeepEP docs/legacy.md: the SM count its example gives the normal kernels
LOW_LATENCY_SM_TIME_SHARE = 0.06 / 0.17  # LMSYS: DeepEP's unit test holds the SMs 0.06 ms of a 0.17 ms dispatch


def comm_sm_share(gpu: GpuProfile, mode: DispatchMode) -> float:
    """Share of compute the dispatch and combine take away over their duration."""
    if mode is DispatchMode.LOW_LATENCY:
        return LOW_LATENCY_SM_TIME_SHARE
    if gpu.sm_count is None:
        return 0.0
    return min(1.0, NORMAL_KERNEL_SMS / gpu.sm_count)


def overlapped_layers_seconds(compute_s: float, comm_s: float, layers: int, sm_share: float) -> float:
    """`layers` MoE layers of two micro-batches, each with `compute_s` of work and `comm_s` of all-to-all."""
    if layers == 0:
        return 0.0
    per_micro_batch = max(comm_s, compute_s + sm_share * comm_s)
    return layers * 2 * per_micro_batch + min(comm_s, compute_s)
