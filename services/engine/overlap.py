"""Two-batch overlap: one micro-batch's dispatch and combine run under the other's compute.

DeepSeek's inference system and SGLang's `--enable-two-batch-overlap` split a step's batch
into two micro-batches and alternate them layer by layer, so that the all-to-all of one
hides behind the attention and expert GEMMs of the other (docs/roofline.md §Two-batch overlap):

    layer_s = 2 x max(comm_s, compute_s + slowed_s)       per MoE layer, each term for one micro-batch
    step_s  = sum over MoE layers of layer_s + min(comm_s, compute_s)   (the pipeline's fill)

`slowed_s` is what compute loses to the communication kernels' SMs:
- DeepEP's normal kernels (prefill) hold their SMs for the whole overlapped layer, and SGLang's
  prefill overlap runs DeepGEMM on the rest (`deep_gemm_num_sms = SMs - DeepEP's num_sms`; DeepSeek's
  profile-data figure: 108 SMs compute, 24 communication), so compute-bound work runs on
  (SMs - 24) / SMs of the GPU: slowed_s = compute_bound_s x 24 / (SMs - 24);
- the low-latency kernels (decode) take every SM while they send and receive and none while the RDMA
  is in flight (DeepSeek profile-data README, "Decoding"; LMSYS large-scale EP post, "Detail
  Breakdown"): DeepEP's unit test occupies the SMs for 0.06 ms of a 0.17 ms dispatch, so
  slowed_s = 0.06 / 0.17 x comm_s.
"""

from __future__ import annotations

from services.engine.expert_dispatch import DispatchMode
from services.profiles.gpu import GpuProfile

NORMAL_KERNEL_SMS = 24  # DeepEP docs/legacy.md `Buffer.set_num_sms(24)`; DeepSeek profile-data: 24 of 132 SMs
LOW_LATENCY_SM_TIME_SHARE = 0.06 / 0.17  # LMSYS: DeepEP's unit test holds the SMs 0.06 ms of a 0.17 ms dispatch


def comm_sm_share(gpu: GpuProfile, mode: DispatchMode) -> float:
    """Share of the GPU's SMs the dispatch and combine kernels hold while they run."""
    if mode is DispatchMode.LOW_LATENCY:
        return LOW_LATENCY_SM_TIME_SHARE
    if gpu.sm_count is None:
        return 0.0
    return min(1.0, NORMAL_KERNEL_SMS / gpu.sm_count)


def compute_lost_seconds(gpu: GpuProfile, mode: DispatchMode, compute_bound_s: float, comm_s: float) -> float:
    """Seconds one micro-batch's compute loses to the communication kernels running beside it."""
    share = comm_sm_share(gpu, mode)
    if mode is DispatchMode.LOW_LATENCY:
        return share * comm_s
    return compute_bound_s * share / (1.0 - share) if share < 1.0 else float("inf")


def overlapped_layers_seconds(compute_s: float, comm_s: float, layers: int, lost_s: float) -> float:
    """`layers` MoE layers of two micro-batches, each with `compute_s` of work and `comm_s` of all-to-all.

    `lost_s` is what each micro-batch's compute loses to the communication's SMs (compute_lost_seconds).
    """
    if layers == 0:
        return 0.0
    per_micro_batch = max(comm_s, compute_s + lost_s)
    return layers * 2 * per_micro_batch + min(comm_s, compute_s)
