"""The communication of one decoder layer and of the LM head on one GPU (docs/roofline.md §Parallelism).

    comm = LayerComm(gpu, model, parallel)
    comm.dense_layer_s(tokens)                  # a dense layer's collectives
    comm.moe_layer_s(tokens, DispatchMode.NORMAL)  # an MoE layer's collectives, dispatch and combine
    comm.head_s(sequences)                      # gathering the LM head's vocabulary shards

`tokens` and `sequences` are the whole instance's in one step.
"""

from __future__ import annotations

from services.engine.expert_dispatch import DispatchMode, ExpertDispatch
from services.engine.parallelism import Parallelism, allgather_seconds, allreduce_seconds
from services.engine.roofline_ops import ACTIVATION_BYTES
from services.profiles.gpu import GpuProfile
from services.profiles.model import ModelProfile


class LayerComm:
    def __init__(self, gpu: GpuProfile, model: ModelProfile, parallel: Parallelism) -> None:
        self.gpu, self.parallel = gpu, parallel
        self._row = model.hidden_size * ACTIVATION_BYTES  # one token's hidden state
        self._vocab = model.vocab_size
        self._expert_parallel = parallel.ep > 1 and model.moe is not None
        self._dispatch = (
            ExpertDispatch.of(gpu, model, parallel.ep, parallel.expert_imbalance) if self._expert_parallel else None
        )

    def _group_split_and_gather(self, tokens: float) -> float:
        """All-reduce in the attention group, then split its tokens over its GPUs and gather them back."""
        gpu, group, dp = self.gpu, self.parallel.attention_tp, self.parallel.dp_attention
        local = tokens / dp * self._row
        return allreduce_seconds(gpu, group, local) + allgather_seconds(gpu, group, local)

    def dense_layer_s(self, tokens: float) -> float:
        gpu, p = self.gpu, self.parallel
        if p.dense_data_parallel:  # every GPU runs the MLP on its own share of the group's tokens
            return self._group_split_and_gather(tokens)
        if p.dp_attention == 1:  # two all-reduces of the hidden state per layer
            return 2 * allreduce_seconds(gpu, p.tp, tokens * self._row)
        # attention all-reduce in its group, then all-gather to the MLP and reduce-scatter back
        return (allreduce_seconds(gpu, p.attention_tp, tokens / p.dp_attention * self._row)
                + 2 * allgather_seconds(gpu, p.tp, tokens * self._row))

    def moe_layer_s(self, tokens: float, mode: DispatchMode) -> float:
        """Everything but dispatch and combine (`moe_a2a_s`) when the experts are expert-parallel."""
        if not self._expert_parallel:
            return self.dense_layer_s(tokens)
        return self._group_split_and_gather(tokens)

    def moe_a2a_s(self, tokens: float, mode: DispatchMode) -> float:
        """Dispatch and combine of one MoE layer (expert_dispatch.py); 0 without EP."""
        if self._dispatch is None:
            return 0.0
        return self._dispatch.seconds(tokens / self.parallel.tp, mode)

    def head_s(self, sequences: float) -> float:
        """Gathering the vocabulary shards, about as dear as an all-reduce of the fp32 logits; none under dense DP."""
        if self.parallel.dense_data_parallel:
            return 0.0
        return allreduce_seconds(self.gpu, self.parallel.tp, sequences * (self._vocab // self.parallel.tp) * 4)
