"""`pdd-emu predict`: the roofline clock's time for one engine step.

    pdd-emu predict --gpu h200-sxm --model llama3-8b --layers 1 --prefill-tokens 8192 --json
    pdd-emu predict --gpu h100-sxm --model deepseek-v3 --tp 32 --dp-attention 32 --ep 32 \
        --sequences 128 --prefill-tokens 4096 --json     # a large-EP prefill step, tokens/s per GPU and node

A prefill or extend step is launched eagerly, a decode step as a CUDA graph,
as the engine does (services/engine/batch.py).
"""

from __future__ import annotations

import argparse
import json

from services.cli.errors import UsageError, fail
from services.engine.batch import Chunk, StepBatch
from services.engine.roofline import RooflineClock, StepPrediction
from services.profiles import load_gpu, load_model
from services.profiles.model import ModelProfile


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "predict",
        help="predict the time of one engine step on an emulated GPU",
        description="Predict one engine step with the roofline clock (formulas: docs/roofline.md).",
    )
    parser.add_argument("--gpu", required=True, help="GPU profile, e.g. h200-sxm")
    parser.add_argument("--model", required=True, help="model profile, e.g. llama3-8b")
    parser.add_argument("--layers", type=int, metavar="N",
                        help="predict N decoder layers only, without embeddings, LM head and sampling")
    parser.add_argument("--tp", type=int, default=1, metavar="N", help="GPUs of the instance, tensor-parallel (default 1)")
    parser.add_argument("--dp-attention", type=int, default=1, metavar="D",
                        help="data-parallel attention groups: attention is tensor-parallel over tp / D GPUs and each "
                             "group serves 1/D of the sequences (default 1: off)")
    parser.add_argument("--ep", type=int, default=1, metavar="E",
                        help="expert parallelism: 1 (experts tensor-parallel) or tp (whole experts per GPU, "
                             "DeepEP dispatch and combine)")
    parser.add_argument("--redundant-experts", type=int, metavar="R",
                        help="EPLB's replicated experts (default: the fewest that fill the ep GPUs evenly)")
    parser.add_argument("--expert-imbalance", type=float, default=1.0, metavar="F",
                        help="routed tokens of the busiest GPU over the mean (default 1.0: balanced)")
    parser.add_argument("--tbo", choices=("on", "off"),
                        help="two-batch overlap of the MoE layers (default: on with --ep > 1)")
    parser.add_argument("--dense-dp", choices=("on", "off"),
                        help="dense layers and LM head data-parallel on every GPU (default off)")
    shape = parser.add_mutually_exclusive_group(required=True)
    shape.add_argument("--prefill-tokens", type=int, metavar="T",
                       help="a prefill of T tokens for each of --sequences sequences (default 1)")
    shape.add_argument("--extend-tokens", type=int, metavar="T", help="T new tokens appended to --context cached ones")
    shape.add_argument("--decode-batch", type=int, metavar="B", help="B sequences decoding one token each")
    parser.add_argument("--sequences", type=int, metavar="N",
                        help="with --prefill-tokens or --extend-tokens: sequences in the step (default 1)")
    parser.add_argument("--cached-tokens", type=int, metavar="C",
                        help="with --prefill-tokens: prefix tokens already in the cache (default 0)")
    parser.add_argument("--context", type=int, metavar="C",
                        help="with --extend-tokens: cached tokens; with --decode-batch: tokens each sequence sees")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=run)


def _positive(value: int | None, flag: str) -> int:
    if value is None or value < 1:
        raise UsageError(f"{flag} must be a positive number of tokens, not {value}")
    return value


def _within_context(tokens: int, model: ModelProfile, what: str) -> None:
    if tokens > model.max_context:
        raise UsageError(f"{what} is {tokens} tokens, beyond {model.name}'s max context of {model.max_context}")


def build_batch(args: argparse.Namespace, model: ModelProfile) -> tuple[StepBatch, str]:
    """The step the flags describe, and a few words naming it."""
    sequences = getattr(args, "sequences", None)
    if sequences is not None and args.decode_batch is not None:
        raise UsageError("--sequences goes with --prefill-tokens or --extend-tokens; --decode-batch is the batch")
    count = 1 if sequences is None else _positive(sequences, "--sequences")
    batch, step = _one_sequence_batch(args, model)
    if count == 1:
        return batch, step
    return StepBatch(chunks=batch.chunks * count), f"{count} sequences, each: {step}"


def _one_sequence_batch(args: argparse.Namespace, model: ModelProfile) -> tuple[StepBatch, str]:
    if args.prefill_tokens is not None:
        if args.context is not None:
            raise UsageError("--context goes with --extend-tokens or --decode-batch; use --cached-tokens for a prefill")
        tokens, cached = _positive(args.prefill_tokens, "--prefill-tokens"), args.cached_tokens or 0
        if cached < 0:
            raise UsageError(f"--cached-tokens must be 0 or more, not {cached}")
        _within_context(cached + tokens, model, "cached plus prefill")
        return StepBatch(chunks=(Chunk(tokens, cached),)), f"prefill {tokens} tokens after {cached} cached"
    if args.cached_tokens is not None:
        raise UsageError("--cached-tokens goes with --prefill-tokens; use --context with --extend-tokens")
    if args.context is None:
        needs = "--extend-tokens needs --context C, the tokens already cached" if args.extend_tokens is not None else \
            "--decode-batch needs --context C, the tokens each sequence attends over"
        raise UsageError(needs)
    context = _positive(args.context, "--context")
    if args.extend_tokens is not None:
        tokens = _positive(args.extend_tokens, "--extend-tokens")
        _within_context(context + tokens, model, "context plus extend")
        return StepBatch(chunks=(Chunk(tokens, context),)), f"extend {tokens} tokens over {context} cached"
    batch = _positive(args.decode_batch, "--decode-batch")
    _within_context(context, model, "--context")
    return StepBatch(decode_contexts=(context,) * batch), f"decode {batch} sequences over {context} tokens each"


def _as_dict(args: argparse.Namespace, step: str, p: StepPrediction, batch: StepBatch, per_node: int) -> dict:
    # input tokens for a prefill or extend, output tokens for decode (one per sequence)
    per_gpu = batch.new_tokens / p.seconds / args.tp
    return {
        "gpu": args.gpu, "model": args.model, "tp": args.tp, "dp_attention": args.dp_attention, "ep": args.ep,
        "layers": args.layers, "step": step,
        "launch_style": p.launch_style.value, "seconds": p.seconds, "ms": p.seconds * 1e3,
        "flops": p.flops, "bytes": p.bytes, "bound": p.bound,
        "compute_s": p.compute_s, "memory_s": p.memory_s, "overhead_s": p.overhead_s,
        "tokens_per_s_per_gpu": per_gpu, "tokens_per_s_per_node": per_gpu * per_node,
    }


def _layout(args: argparse.Namespace) -> dict:
    on_off = {None: None, "on": True, "off": False}
    return {"redundant_experts": args.redundant_experts, "expert_imbalance": args.expert_imbalance,
            "tbo": on_off[args.tbo], "dense_dp": args.dense_dp == "on"}


def run(args: argparse.Namespace) -> int:
    try:
        gpu, model = load_gpu(args.gpu), load_model(args.model)
        batch, step = build_batch(args, model)
        clock = RooflineClock(gpu, model, tp=args.tp, layers=args.layers, dp_attention=args.dp_attention, ep=args.ep,
                              **_layout(args))
    except ValueError as exc:  # unknown names, bad sizes, tp or layers the model cannot take
        fail(str(exc))
    prediction = clock.predict(batch)
    if args.json:
        print(json.dumps(_as_dict(args, step, prediction, batch, gpu.gpus_per_node)))
    else:
        layers = "all layers" if args.layers is None else f"{args.layers} layer{'s' * (args.layers > 1)}"
        print(
            f"{model.name} on {gpu.name} (tp={args.tp}, dp_attention={args.dp_attention}, ep={args.ep}, {layers}), {step}: {prediction.seconds * 1e3:.3f} ms, "
            f"{prediction.bound}-bound, {prediction.flops / 1e12:.3f} TFLOP, {prediction.bytes / 1e9:.3f} GB per GPU"
        )
    return 0
