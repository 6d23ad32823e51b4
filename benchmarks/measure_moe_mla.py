"""Measure a DeepSeek-V3-shaped MoE layer and MLA attention on the real card, to fit the MoE and MLA fractions.

    python benchmarks/measure_moe_mla.py [OUTDIR]      # on a GPU with PyTorch; about two minutes on an H200

Written in the conventions of shared/profiles/h200/measure_layers.py (random data, median of CUDA-event-timed
repeats after warm-up, one JSON file, OUTDIR/moe-mla-measurements.json). It needs only PyTorch: fp8 GEMMs run
through torch._scaled_mm with per-row and per-column scales where the card has fp8 (Hopper and later), bf16
otherwise, so the file says which ran. The rows answer docs/roofline.md §Borrowed fractions:
- `gemm_fp8`: DeepSeek-V3's attention projections and one expert's GEMMs over M (the fp8_gemm_* fractions);
- `grouped_experts`: E experts' gate-up and down for N tokens each, one GEMM per expert (routed experts at real
  shapes; a grouped kernel such as DeepGEMM's can only be faster);
- `mla_prefill`: causal attention with 128 heads, q/k width 192, v width 128 (v padded to 192 for flash), S tokens;
- `mla_decode`: absorbed decode, 128 query heads of width 576 over a latent cache of C entries, B sequences
  (scores, softmax and the value product as three kernels; FlashMLA fuses them).
"""
import json, os, statistics, sys, time
import torch
import torch.nn.functional as F

dev = "cuda"
OUT = sys.argv[1] if len(sys.argv) > 1 else "."
H, HEADS, Q_LORA, KV_LORA, ROPE, NOPE, V, EXPERT = 7168, 128, 1536, 512, 64, 128, 128, 2048
props = torch.cuda.get_device_properties(0)
FP8 = props.major >= 9 and hasattr(torch, "_scaled_mm")
res = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "sm_count": props.multi_processor_count,
       "gemm_dtype": "fp8 (torch._scaled_mm, row/column scales)" if FP8 else "bf16",
       "gemm_fp8": [], "grouped_experts": [], "mla_prefill": [], "mla_decode": []}


def bench(fn, reps=20, warm=5):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True); b = torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); torch.cuda.synchronize()
        ts.append(a.elapsed_time(b) / 1e3)
    return statistics.median(ts)


def weight(k, n):
    """W as the GEMM wants it: fp8 column-major (k x n) with a per-column scale, or bf16."""
    w = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
    return (w.to(torch.float8_e4m3fn).t(), torch.ones(1, n, device=dev)) if FP8 else (w.t(), None)


def activation(m, k):
    x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
    return (x.to(torch.float8_e4m3fn), torch.ones(m, 1, device=dev)) if FP8 else (x, None)


def matmul(x, w):
    if FP8:
        return torch._scaled_mm(x[0], w[0], scale_a=x[1], scale_b=w[1], out_dtype=torch.bfloat16)
    return x[0] @ w[0]


t0 = time.time()
shapes = [(H, Q_LORA + KV_LORA + ROPE), (Q_LORA, HEADS * (NOPE + ROPE)), (KV_LORA, HEADS * (NOPE + V)),
          (HEADS * V, H), (H, 2 * EXPERT), (EXPERT, H)]
for k, n in shapes:
    w = weight(k, n)
    for m in [64, 128, 512, 2048, 4096, 16384]:
        x = activation(m, k)
        t = bench(lambda: matmul(x, w))
        res["gemm_fp8"].append({"M": m, "K": k, "N": n, "seconds": t, "TFLOPs": 2 * m * k * n / t / 1e12})
    print(f"gemm K={k:>5} N={n:>5} M=4096 {res['gemm_fp8'][-2]['TFLOPs']:7.1f} TF/s", flush=True)
    del w

for experts in [4, 8]:
    gate_up = [weight(H, 2 * EXPERT) for _ in range(experts)]
    down = [weight(EXPERT, H) for _ in range(experts)]
    for tokens in [32, 128, 512, 2048, 8192]:
        xs = [activation(tokens, H) for _ in range(experts)]
        ys = [activation(tokens, EXPERT) for _ in range(experts)]
        t = bench(lambda: [(matmul(x, g), matmul(y, d)) for x, y, g, d in zip(xs, ys, gate_up, down)], reps=10)
        flops = experts * 2 * tokens * 3 * H * EXPERT
        res["grouped_experts"].append({"experts": experts, "tokens_per_expert": tokens, "seconds": t,
                                       "TFLOPs": flops / t / 1e12})
        print(f"experts {experts} x {tokens:>5} tokens {t*1e6:9.1f}us {flops/t/1e12:7.1f} TF/s", flush=True)
    del gate_up, down

with torch.inference_mode():
    for s in [1024, 4096, 16384]:
        q = torch.randn(1, HEADS, s, NOPE + ROPE, device=dev, dtype=torch.bfloat16)
        k = torch.randn_like(q); v = torch.randn_like(q)  # v padded from 128 to 192 for the flash kernel
        t = bench(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), reps=10)
        flops = 2 * HEADS * s * s * (NOPE + ROPE + V) / 2  # causal half, at v's real width
        res["mla_prefill"].append({"S": s, "seconds": t, "TFLOPs": flops / t / 1e12})
        print(f"mla prefill S={s:>6} {t*1e3:8.2f}ms {flops/t/1e12:7.1f} TF/s", flush=True)
        del q, k, v
    latent = KV_LORA + ROPE
    for b in [1, 16, 64, 128]:
        for c in [1024, 4096, 16384]:
            q = torch.randn(b, HEADS, latent, device=dev, dtype=torch.bfloat16)
            cache = torch.randn(b, c, latent, device=dev, dtype=torch.bfloat16)
            t = bench(lambda: torch.softmax(q @ cache.transpose(1, 2), -1) @ cache[..., :KV_LORA])
            moved = b * c * latent * 2
            res["mla_decode"].append({"B": b, "C": c, "seconds": t, "GBps": moved / t / 1e9,
                                      "TFLOPs": 2 * b * c * HEADS * (latent + KV_LORA) / t / 1e12})
            print(f"mla decode B={b:>4} C={c:>6} {t*1e6:9.1f}us {moved/t/1e9:7.0f} GB/s", flush=True)
            del q, cache

res["wall_s"] = time.time() - t0
json.dump(res, open(os.path.join(OUT, "moe-mla-measurements.json"), "w"), indent=1)
print("done in", round(res["wall_s"]), "s")
