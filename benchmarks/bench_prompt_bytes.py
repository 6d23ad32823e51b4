"""Control-plane messages and bytes of one P-RLD-MD request, per hop, in the in-process mesh.

    .venv/bin/python -m benchmarks.bench_prompt_bytes [--tokens 65536] [--output 1000]

The simulated mesh (services/simulate/wiring.py) runs the mesh's servicers and router
on virtual time; here every servicer method is wrapped to count the requests it gets
from each caller, their serialised size (protobuf `ByteSize`, without HTTP/2 framing)
and how many of them carry the prompt's token ids. Counts are exact, not timed, so
one request is enough (docs/mesh.md §Request flow records the result).
"""

from __future__ import annotations

import argparse

from services.simulate.census import census_of_one_request, prompt_of_length


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=65536)
    parser.add_argument("--output", type=int, default=1000)
    parser.add_argument("--scenario", default="pdd-mini")
    args = parser.parse_args()
    pdd, _, census, _ = census_of_one_request(prompt_of_length(args.tokens), args.output, args.scenario)
    print(f"{args.scenario}, {args.tokens}-token prompt, {args.output} output tokens: pipeline {pdd['pipeline']}")
    print(f"{'hop':34} {'messages':>8} {'bytes':>10} {'with prompt':>11} {'prompt bytes':>12}")
    for (caller, service), hop in sorted(census.per_link().items()):
        print(f"{caller + ' -> ' + service:34} {hop.messages:8d} {hop.bytes:10d} {hop.prompt_messages:11d} "
              f"{hop.prompt_bytes:12d}")
    for (caller, service, method), hop in sorted(census.hops.items()):
        print(f"  {caller} -> {service} {method}: {hop.messages} message(s), {hop.bytes} bytes")
    total = sum(h.bytes for h in census.hops.values())
    print(f"total request bytes: {total}  (prompt ids packed: {4 * args.tokens} bytes)")


if __name__ == "__main__":
    main()
