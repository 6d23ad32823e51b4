"""Where a streamed token's cost comes from: the part every token pays, and the part each request pays.

bench_token_cost prices a token at one stream length (500). A process's CPU per
load is a sum of work done per token (engine steps, the feed, SSE chunks) and
work done per request (HTTP intake, the control calls, KV transfers, admission),
so its cost per token at T tokens a stream is

    c(T) = a + b / T        a: us per token, b: us per request

Two stream lengths T1 < T2 solve it (docs/mesh-measured.md §Cost of a request):

    b = (c(T1) - c(T2)) / (1/T1 - 1/T2)        a = c(T2) - b / T2

For the floor server and each preset, loads of both lengths alternate, 64
streams each, `--repeats` times; each process's median cost at each length
gives its a and b. The floor splits the same way, so a preset's per-token
ratio (a against the floor's a) says how far the token path is from a bare
server, apart from what the requests cost.

    .venv/bin/python -m benchmarks.bench_cost_split [--lengths 100 1000] [--repeats 3] [--presets ...]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from benchmarks.bench_token_cost import PRESETS, floor_server, one_load, relayed_requests
from benchmarks.meshctl import mesh
from services.launcher.processes import read_state


def split(cost_short: float, cost_long: float, short: int, long: int) -> tuple[float, float]:
    """(us per token, us per request) from the costs per token at two stream lengths."""
    per_request = (cost_short - cost_long) / (1 / short - 1 / long)
    return cost_long - per_request / long, per_request


def measure(url: str, pids: dict[str, int], lengths: tuple[int, int], repeats: int, streams: int,
            plan=None) -> tuple[dict[str, tuple[float, float]], list[int]]:
    """Each process's (us per token, us per request), and how many requests each long load relayed."""
    one_load(url, pids, min(streams, 16), 50, 90_000)  # warm-up: connections, code paths
    costs: dict[int, list[dict[str, float]]] = {t: [] for t in lengths}
    relayed = []
    for i in range(repeats):
        for tokens in lengths:
            before = relayed_requests(plan) if plan is not None else 0
            costs[tokens].append(one_load(url, pids, streams, tokens, 20_000 + 1000 * i + tokens)["per_token_us"])
            if plan is not None and tokens == lengths[1]:
                relayed.append(relayed_requests(plan) - before)
    short, long = lengths
    parts = {name: split(statistics.median(c[name] for c in costs[short]),
                         statistics.median(c[name] for c in costs[long]), short, long) for name in pids}
    return parts, relayed


def print_split(label: str, parts: dict[str, tuple[float, float]], floor_per_token: float, relayed: list[int]) -> None:
    per_token = sum(a for a, _ in parts.values())
    per_request = sum(b for _, b in parts.values())
    detail = ", ".join(f"{name} {a:.1f} us + {b / 1000:.2f} ms" for name, (a, b) in
                       sorted(parts.items(), key=lambda item: -item[1][1]))
    note = f"; relayed {'/'.join(map(str, relayed))} per long load" if any(relayed) else ""
    print(f"{label:<15} {per_token:6.1f} us/token (x{per_token / floor_per_token:.2f} the floor's) + "
          f"{per_request / 1000:5.2f} ms/request  ({detail}{note})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=int, nargs=2, default=[100, 1000], metavar=("SHORT", "LONG"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--streams", type=int, default=64)
    parser.add_argument("--presets", nargs="*", default=list(PRESETS))
    parser.add_argument("--step-ms", type=float, default=10.0, help="the floor server's time between chunks")
    args = parser.parse_args()
    short, long = sorted(args.lengths)
    if short < 1 or short == long:
        parser.error("--lengths needs two different stream lengths of at least 1 token")
    print(f"{args.streams} streams; loads of {short} and {long} tokens alternated {args.repeats} times; "
          f"median CPU per token at each length split as a + b / T (a per token, b per request)")
    with floor_server(args.step_ms) as (floor_url, floor_pid):
        floor, _ = measure(floor_url, {"floor": floor_pid}, (short, long), args.repeats, args.streams)
        floor_per_token = floor["floor"][0]
        print_split("floor", floor, floor_per_token, [])
        for preset in args.presets:
            with tempfile.TemporaryDirectory() as tmp, mesh(preset, Path(tmp)) as (url, plan):
                _, started = read_state(Path(tmp))
                parts, relayed = measure(url, {p.name: p.pid for p in started}, (short, long), args.repeats,
                                         args.streams, plan)
                print_split(preset, parts, floor_per_token, relayed)


if __name__ == "__main__":
    main()
