"""The step clock: how long one engine step takes on an emulated GPU.

Every op of a layer is its own roofline, max(FLOPs / achieved compute, bytes /
achieved bandwidth), summed over the layer; fixed launch costs depend on
the step's launch style. All formulas: docs/roofline.md.

    clock = RooflineClock.for_names("h200-sxm", "llama3-8b")
    clock.step_seconds(StepBatch(chunks=(Chunk(512),), decode_contexts=(4096,) * 64))
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from services.engine.batch import Chunk, StepBatch
from services.engine.expert_dispatch import DispatchMode
from services.engine.layer_comm import LayerComm
from services.engine.layer_shapes import Gemm, LayerShapes, MlpShape, layer_shapes
from services.engine.overlap import compute_lost_seconds, overlapped_layers_seconds
from services.engine.parallelism import Parallelism
from services.engine.roofline_ops import (
    ACTIVATION_BYTES, Cost, OpRates, StepPrediction, Tally, TokenCosts, decode_attention_cost, elementwise_cost,
    expected_distinct_experts, prefill_attention_cost,
)
from services.profiles import load_gpu, load_model
from services.profiles.gpu import GpuProfile
from services.profiles.model import DTYPE_BYTES, ModelProfile
from services.types import LaunchStyle

_MEMO_LIMIT = 1 << 16


class RooflineClock:
    """Predicts step times of `model` on `gpu` over `tp` GPUs, optionally with DP attention and EP.

    `layers` overrides the layer count and drops embeddings, LM head and
    sampling, so that one decoder layer can be predicted (docs/roofline.md §Step).
    `layout` takes Parallelism's other fields: redundant_experts, expert_imbalance,
    dense_dp, tbo (docs/roofline.md §Parallelism).
    """

    def __init__(self, gpu: GpuProfile, model: ModelProfile, tp: int = 1, layers: int | None = None,
                 dp_attention: int = 1, ep: int = 1, **layout: Any) -> None:
        if layers is not None and not 1 <= layers <= model.num_layers:
            raise ValueError(f"layers={layers} is outside 1..{model.num_layers} for {model.name}")
        self.gpu, self.model, self.tp, self.layers = gpu, model, tp, layers
        if tp < 1:
            layer_shapes(model, tp)  # raises, naming the degrees the model takes
        self.parallel = Parallelism(tp, dp_attention, ep, **layout)
        self.parallel.check(model)
        # with whole experts and data-parallel attention only the dense MLP and the vocabulary split over tp
        if tp not in model.tensor_parallel_degrees() and not (ep == tp == dp_attention):
            layer_shapes(model, tp)  # raises, naming the degrees the model takes
        self._dp = dp_attention
        self._dense_dp = self.parallel.dense_data_parallel
        self._shapes: LayerShapes = layer_shapes(model, tp, self.parallel.attention_tp, ep, self._dense_dp)
        self._comm = LayerComm(gpu, model, self.parallel)
        self._slots = self.parallel.expert_slots(model) if model.moe is not None else 0
        # host-tier KV each GPU loads per token over its PCIe link (docs/engine.md, "Host tier")
        self._host_load_s_per_token = (
            model.kv_bytes_per_token * self.parallel.kv_replicas(model) / tp / gpu.pcie_bandwidth_Bps
        )
        self._rates = OpRates.of(gpu, model.dtype)
        self._weight_bytes = DTYPE_BYTES[model.dtype]
        self._layer_count = layers or model.num_layers
        # the dense layers come first (DeepSeek's first_k_dense), so a short stack is mostly dense
        self._dense_layers = min(self._layer_count, model.dense_layers)
        self._moe_layers = self._layer_count - self._dense_layers
        self._with_head = layers is None
        self._tbo = self.parallel.two_batch_overlap and self._moe_layers > 0
        self._launch = {
            style: (c.kernel_s.value, c.step_s.value, c.overlap_exponent.value) for style, c in gpu.launch.items()
        }
        self._memo: dict[tuple[int, int, LaunchStyle], TokenCosts] = {}

    @classmethod
    def for_names(cls, gpu_name: str, model_name: str, tp: int = 1, layers: int | None = None,
                  dp_attention: int = 1, ep: int = 1, **layout: Any) -> RooflineClock:
        return cls(load_gpu(gpu_name), load_model(model_name), tp, layers, dp_attention, ep, **layout)

    # --- the hot path ------------------------------------------------------
    def step_seconds(self, batch: StepBatch, launch_style: LaunchStyle | None = None) -> float:
        chunks, contexts = batch.chunks, batch.decode_contexts
        if not chunks and not contexts:
            return 0.0
        style = launch_style or (LaunchStyle.EAGER if chunks else LaunchStyle.CUDA_GRAPH)
        tokens = len(contexts) + sum([chunk.new_tokens for chunk in chunks])
        key = (tokens, len(contexts) + len(chunks), style)
        token_costs = self._memo.get(key) or self._token_costs(*key)
        attention_s = attention_compute_s = 0.0  # one layer's attention kernels, DP ranks sharing the sequences
        for compute_s, memory_s, _, _ in self._attention_costs(batch):
            if compute_s > memory_s:
                attention_compute_s += compute_s / self._dp
            else:
                attention_s += memory_s / self._dp
        attention_s += attention_compute_s
        gpu_s, launch_s = self._overlapped(token_costs, key, attention_s, attention_compute_s)
        seconds = self._with_launch(gpu_s, launch_s, style)
        return self._with_host_load(seconds, batch.host_load_tokens) if batch.host_load_tokens else seconds

    def _overlapped(self, full: TokenCosts, key: tuple[int, int, LaunchStyle], attention_s: float,
                    attention_compute_s: float) -> tuple[float, float]:
        """GPU and launch seconds of the step, its MoE layers two-batch overlapped where the layout says so.

        `attention_s` is one layer's attention kernels, `attention_compute_s` their compute-bound part.
        """
        serial_s = full.gpu_s + attention_s * self._layer_count
        if not self._tbo:
            return serial_s, full.launch_s
        tokens, sequences, style = key
        half_key = ((tokens + 1) // 2, (sequences + 1) // 2, style)
        half = self._memo.get(half_key) or self._token_costs(*half_key)
        moe = self._moe_layers
        rest_s = serial_s - moe * (full.moe_layer_s + full.moe_a2a_s + attention_s)
        mode = DispatchMode.NORMAL if style is LaunchStyle.EAGER else DispatchMode.LOW_LATENCY
        compute_bound_s = half.moe_layer_compute_s + attention_compute_s / 2
        lost_s = compute_lost_seconds(self.gpu, mode, compute_bound_s, half.moe_a2a_s)
        moe_s = overlapped_layers_seconds(half.moe_layer_s + attention_s / 2, half.moe_a2a_s, moe, lost_s)
        overlapped = rest_s + moe_s, full.launch_s + moe * full.moe_launch_s  # each micro-batch launches its kernels
        if self.parallel.tbo is None and serial_s <= overlapped[0]:  # auto: only where it pays, as deployments tune it
            return serial_s, full.launch_s
        return overlapped

    def chunked_prefill_seconds(self, tokens: int, chunk_tokens: int, cached_tokens: int = 0) -> float:
        """A lone prompt computed in chunks of `chunk_tokens`, each over the KV of those before it."""
        return sum(
            self.step_seconds(StepBatch(chunks=(Chunk(min(chunk_tokens, cached_tokens + tokens - done), done),)))
            for done in range(cached_tokens, cached_tokens + tokens, chunk_tokens)
        )

    def _with_host_load(self, seconds: float, tokens: int) -> float:
        """Layer-wise load overlapped with compute, as HiCache does: only the first layer's share shows."""
        load_s = tokens * self._host_load_s_per_token
        return max(seconds, load_s) + load_s / self._layer_count

    def _with_launch(self, gpu_s: float, launch_s: float, style: LaunchStyle) -> float:
        """docs/roofline.md §Fixed costs: launch work overlaps GPU work as far as the style allows."""
        _, step_s, overlap = self._launch[style]
        if overlap == 1.0:
            return gpu_s + launch_s + step_s
        return (gpu_s**overlap + launch_s**overlap) ** (1.0 / overlap) + step_s

    def predict(self, batch: StepBatch, launch_style: LaunchStyle | None = None) -> StepPrediction:
        style = launch_style or batch.launch_style
        if batch.is_empty:
            return StepPrediction(0.0, 0.0, 0.0, "overhead", 0.0, 0.0, 0.0, style)
        base = self._token_costs(batch.new_tokens, len(batch.decode_contexts) + len(batch.chunks), style)
        attention = Tally()
        for cost in self._attention_costs(batch):
            attention.add(cost, self._layer_count / self._dp)
        compute_s, memory_s = base.compute_s + attention.compute_s, base.memory_s + attention.memory_s
        key = (batch.new_tokens, len(batch.decode_contexts) + len(batch.chunks), style)
        gpu_s, launch_s = self._overlapped(base, key, (attention.compute_s + attention.memory_s) / self._layer_count,
                                           attention.compute_s / self._layer_count)
        hidden_s = max(0.0, compute_s + memory_s - gpu_s)  # what two-batch overlap hides: communication first
        memory_s, compute_s = max(0.0, memory_s - hidden_s), compute_s - max(0.0, hidden_s - memory_s)
        seconds = self._with_launch(gpu_s, launch_s, style)
        if batch.host_load_tokens:
            memory_s += self._with_host_load(seconds, batch.host_load_tokens) - seconds
            seconds = self._with_host_load(seconds, batch.host_load_tokens)
        overhead_s = seconds - compute_s - memory_s  # the launch and step cost not hidden behind GPU work
        parts = {"compute": compute_s, "memory": memory_s, "overhead": overhead_s}
        return StepPrediction(
            seconds=seconds,
            flops=base.flops + attention.flops,
            bytes=base.bytes + attention.bytes,
            bound=max(parts, key=parts.__getitem__),
            compute_s=compute_s,
            memory_s=memory_s,
            overhead_s=overhead_s,
            launch_style=style,
        )

    # --- attention: depends on every sequence's context ---------------------
    def _attention_costs(self, batch: StepBatch) -> Iterator[Cost]:
        """docs/roofline.md §Attention: one layer's cost of the decode tokens, then of each chunk."""
        sh, rates = self._shapes.attention, self._rates
        compression = sh.kv_sequence_compression
        if batch.decode_contexts:
            entries = sum(batch.decode_contexts) / compression
            moved = entries * sh.kv_entry_bytes + len(batch.decode_contexts) * sh.query_output_bytes_per_token
            yield decode_attention_cost(rates, entries, sh.decode_flops_per_pair, moved)
        for chunk in batch.chunks:
            new, cached = chunk.new_tokens, chunk.cached_tokens
            pairs = new * (cached + (new + 1) / 2) / compression  # causal within the chunk
            moved = (cached + new) / compression * sh.kv_entry_bytes + new * sh.query_output_bytes_per_token
            yield prefill_attention_cost(rates, pairs, sh.prefill_flops_per_pair, moved)

    # --- everything else: depends only on token and sequence counts --------
    def _token_costs(self, tokens: int, sequences: int, style: LaunchStyle) -> TokenCosts:
        sh, rates, weight_bytes = self._shapes, self._rates, self._weight_bytes
        mode = DispatchMode.NORMAL if style is LaunchStyle.EAGER else DispatchMode.LOW_LATENCY
        attention = Tally()  # one layer's attention half but its kernel (which depends on the contexts)
        attention_tokens = tokens / self._dp  # each DP attention rank projects its own sequences' tokens
        for gemm in sh.attention.gemms:
            attention.add_gemm(rates, attention_tokens, gemm, weight_bytes)
        attention.add(elementwise_cost(rates, attention_tokens * sh.attention.elementwise_bytes_per_token))
        contiguous = sh.contiguous_prefill if mode is DispatchMode.NORMAL else None
        if contiguous is not None:  # docs/roofline.md §Expert-parallel prefill
            attention.add(elementwise_cost(rates, attention_tokens * contiguous.attention_bytes_per_token))
        dense, moe = Tally(), Tally()
        self._add_mlp(dense, sh.dense_mlp, tokens, self._dense_dp)
        dense.memory_s += self._comm.dense_layer_s(tokens)
        tally = Tally()
        tally.add_tally(attention, self._dense_layers)
        tally.add_tally(dense, self._dense_layers)
        kernel_s = self._launch[style][0]
        attention_kernels = sh.attention.kernels + (contiguous.attention_kernels if contiguous else 0)
        moe_kernels = attention_kernels
        if sh.moe_mlp is not None:
            self._add_mlp(moe, sh.moe_mlp, tokens, self.parallel.ep > 1)
            moe.memory_s += self._comm.moe_layer_s(tokens, mode)
            moe_kernels += sh.moe_mlp.kernels
            if contiguous is not None:  # each GPU quantises and permutes its own 1/tp of the tokens
                moe.add(elementwise_cost(rates, tokens / self.tp * contiguous.moe_bytes_per_token))
                moe_kernels += contiguous.moe_kernels
        moe_a2a_s = self._comm.moe_a2a_s(tokens, mode) if sh.moe_mlp is not None else 0.0
        tally.add_tally(attention, self._moe_layers)
        tally.add_tally(moe, self._moe_layers)
        tally.memory_s += moe_a2a_s * self._moe_layers
        kernels = (attention_kernels + sh.dense_mlp.kernels) * self._dense_layers + moe_kernels * self._moe_layers
        if self._with_head:
            kernels += self._add_head(tally, tokens, sequences)
        costs = TokenCosts(
            tally.compute_s + tally.memory_s, tally.compute_s, tally.memory_s, kernels * kernel_s, tally.flops,
            tally.bytes, attention.compute_s + attention.memory_s + moe.compute_s + moe.memory_s,
            attention.compute_s + moe.compute_s, moe_a2a_s, moe_kernels * kernel_s,
        )
        if len(self._memo) >= _MEMO_LIMIT:
            self._memo.clear()
        self._memo[(tokens, sequences, style)] = costs
        return costs

    def _add_mlp(self, tally: Tally, mlp: MlpShape, tokens: int, data_parallel: bool) -> None:
        # data-parallel (EP's router and shared experts, dense DP's MLP): each GPU runs its own 1/tp of the tokens
        local_tokens = tokens / self.tp if data_parallel else tokens
        for gemm in mlp.gemms:
            tally.add_gemm(self._rates, local_tokens, gemm, self._weight_bytes)
        tally.add(elementwise_cost(self._rates, local_tokens * mlp.elementwise_bytes_per_token))
        if mlp.routed_experts:  # docs/roofline.md §MoE: only the experts the batch touches are read
            distinct = expected_distinct_experts(mlp.routed_experts, mlp.experts_per_token, tokens)
            if self.parallel.ep == 1:
                touched, per_expert = distinct, tokens * mlp.experts_per_token / distinct
            else:  # each GPU's slots, touched as often as their experts; the busiest GPU sets the pace
                touched = self._slots * distinct / mlp.routed_experts
                routed = tokens * mlp.experts_per_token / self.parallel.ep * self.parallel.expert_imbalance
                per_expert = routed / touched
            for gemm in mlp.expert_gemms:
                tally.add_gemm(self._rates, per_expert, gemm, self._weight_bytes, touched)

    def _add_head(self, tally: Tally, tokens: int, sequences: int) -> int:
        """docs/roofline.md §Full-model step: embedding gather, final norm, LM head on last tokens, sampling."""
        h = self.model.hidden_size
        # vocabulary-parallel over tp, or (dense DP) whole on every GPU for its own sequences
        vocab, rows = (self.model.vocab_size, sequences / self.tp) if self._dense_dp else \
            (self.model.vocab_size // self.tp, sequences)
        tally.add(elementwise_cost(self._rates, tokens * 2 * 2 * h * ACTIVATION_BYTES))  # gather + final norm
        tally.add_gemm(self._rates, rows, Gemm(h, vocab), self._weight_bytes)
        logits_bytes = rows * vocab * 4  # fp32 logits
        tally.add(elementwise_cost(self._rates, 2 * logits_bytes))  # softmax and argmax read them
        tally.memory_s += self._comm.head_s(sequences)
        return 4
