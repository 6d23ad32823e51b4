"""What each part of the report shows and what to look at, and the terms it uses, defined once.

Keys are the figures' file stems (and "table"); a report adds, beside any of
them, notes of its own (why a mini-scale result differs from the PDD report's).
Formulas: docs/loadgen.md, "Reports", and docs/design.md, "Metrics".
"""

from __future__ import annotations

CAPTIONS = {
    "table": "Each deployment under the same load: latency percentiles, SLA goodput, cost and BCR. "
             "Look at TTFT P99 (the slowest 1% of first tokens) and at SLA goodput against the sent rate.",
    "ttft_cdf": "Share of requests (y) whose first token came within x seconds, one line per deployment; the "
                "dotted line is the SLA's TTFT limit. Look at the top right: the tail, where the deployments part.",
    "hit_rate_bins": "Share of requests in each prefix-hit-rate bin (the bins widen away from 100%). A high-hit "
                     "request sends little KV; the 0-90% bin holds the requests whose KV is large.",
    "wan_throughput": "KV bytes crossing the WAN, in emulated Gbit/s per bin (the width is on the x axis), against "
                      "the line's rate. Where a run touches the line, transfers queue behind each other.",
    "request_timeline": "One request's stages on the server, one lane each, and its tokens as the client received "
                        "them (bottom lane). In PDD, look for the relay's tokens (green) streaming while the KV "
                        "still crosses to main decode, then the handoff.",
    "goodput_vs_rate": "SLA goodput against the offered rate, per deployment; the dotted diagonal is every "
                       "request within the SLA. Where a line leaves the diagonal, the deployment saturates.",
}

TERMS = {
    "TTFT": "time to first token: from the client's send to the first content token it receives.",
    "TPOT": "time per output token: (E2E - TTFT) / (tokens - 1); E2E is send to last token.",
    "SLA goodput": "completed requests per second that met both SLA limits (TTFT and TPOT), over the run's "
                   "window (first send to last answer).",
    "offered and sent req/s": "offered is the mean rate of the open-loop Poisson arrivals; sent is what this "
                              "run's draw sent per second of its window. Goodput can exceed the offered rate "
                              "when the draw ran above its mean, never the sent rate.",
    "BCR": "benefit-cost ratio: SLA goodput per dollar-hour of the deployment's GPUs and WAN line. The PDD "
           "report's BCR divides max goodput (the highest load at which 90% of requests meet the SLA); at one "
           "offered rate that every deployment meets, BCR ranks cost only.",
    "RLD share": "the share of output tokens that relay decode (RLD) generated; main decode (MD) made the rest.",
}
