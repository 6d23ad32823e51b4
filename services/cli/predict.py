"""`pdd-emu predict`: the roofline clock's time for one engine step.

    pdd-emu predict --gpu h200-sxm --model llama3-8b --layers 1 --prefill-tokens 8192 --json

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
                             "all-to-all dispatch and combine)")
    shape = parser.add_mutually_exclusive_group(required=True)
    shape.add_argument("--prefill-tokens", type=int, metavar="T", help="one sequence's prefill of T tokens")
    shape.add_argument("--extend-tokens", type=int, metavar="T", help="T new tokens appended to --context cached ones")
    shape.add_argument("--decode-batch", type=int, metavar="B", help="B sequences decoding one token each")
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


def _as_dict(args: argparse.Namespace, step: str, p: StepPrediction) -> dict:
    return {
        "gpu": args.gpu, "model": args.model, "tp": args.tp, "dp_attention": args.dp_attention, "ep": args.ep,
        "layers": args.layers, "step": step,
        "launch_style": p.launch_style.value, "seconds": p.seconds, "ms": p.seconds * 1e3,
        "flops": p.flops, "bytes": p.bytes, "bound": p.bound,
        "compute_s": p.compute_s, "memory_s": p.memory_s, "overhead_s": p.overhead_s,
    }


def run(args: argparse.Namespace) -> int:
    try:
        gpu, model = load_gpu(args.gpu), load_model(args.model)
        batch, step = build_batch(args, model)
        clock = RooflineClock(gpu, model, tp=args.tp, layers=args.layers, dp_attention=args.dp_attention, ep=args.ep)
    except ValueError as exc:  # unknown names, bad sizes, tp or layers the model cannot take
        fail(str(exc))
    prediction = clock.predict(batch)
    if args.json:
        print(json.dumps(_as_dict(args, step, prediction)))
    else:
        layers = "all layers" if args.layers is None else f"{args.layers} layer{'s' * (args.layers > 1)}"
        print(
            f"{model.name} on {gpu.name} (tp={args.tp}, dp_attention={args.dp_attention}, ep={args.ep}, {layers}), {step}: {prediction.seconds * 1e3:.3f} ms, "
            f"{prediction.bound}-bound, {prediction.flops / 1e12:.3f} TFLOP, {prediction.bytes / 1e9:.3f} GB per GPU"
        )
    return 0
