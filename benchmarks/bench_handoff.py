"""The 100-token handoff: token ids + local extend (pdd) against shipping the relay's KV (pdd-kvship).

The measurement lives in services/experiments/handoff.py (also run by
`pdd-emu experiment handoff`); this runs it on pdd-mini and prints a table.

    .venv/bin/python -m benchmarks.bench_handoff [--requests 20] [--jitter 20ms] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json

from services.experiments.handoff import compare


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--jitter", default="20ms")
    parser.add_argument("--max-tokens", type=int, default=300)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = asyncio.run(compare("pdd-mini", "pdd-kvship-mini", args.requests, args.jitter, args.max_tokens))
    if args.json:
        print(json.dumps(results))
        return
    print(f"prompt: {results['prompt_tokens']} tokens")
    print(f"{'path':<10}{'n':>4}{'mean ms':>10}{'max ms':>10}{'std ms':>10}{'cut tokens':>12}{'client gap ms':>15}")
    for name in ("token_ids", "kv_ship"):
        r = results[name]
        print(f"{name:<10}{r['requests']:>4}{r['mean_s'] * 1e3:10.1f}{r['max_s'] * 1e3:10.1f}{r['std_s'] * 1e3:10.1f}"
              f"{r['cut_tokens_mean']:12.0f}{r['client_max_gap_mean_s'] * 1e3:15.1f}")


if __name__ == "__main__":
    main()
