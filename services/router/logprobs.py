"""Emulated log-probabilities: deterministic, valid, and documented as not a model's (docs/mesh.md, "Logprobs").

No model runs, so a token's log-probability is a stable function of the
prompt fingerprint, the position and the token id. At each position the chosen
token gets probability p0 = exp(-3u) and the alternatives share 1 - p0 in
halving portions, so every value is at most 0, the probabilities at one
position sum to at most 1, and `top_logprobs` lists come out sorted.
"""

from __future__ import annotations

import math

from services.engine.tokens import splitmix64

_MASK64 = (1 << 64) - 1
_UNIT = float(1 << 64)


def _unit(*parts: int) -> float:
    """A value in [0, 1) from a hash of `parts`."""
    x = 0
    for part in parts:
        x = splitmix64((x ^ (part & _MASK64)) & _MASK64)
    return x / _UNIT


def _chosen_probability(fingerprint: int, position: int, token_id: int) -> float:
    return math.exp(-3.0 * _unit(fingerprint, position, token_id))


def token_logprob(fingerprint: int, position: int, token_id: int) -> float:
    """Log-probability of `token_id` at `position` (negative positions are prompt tokens); always <= 0."""
    return math.log(_chosen_probability(fingerprint, position, token_id))


def top_logprobs(fingerprint: int, position: int, token_id: int, k: int, vocab_size: int) -> list[tuple[int, float]]:
    """The `k` most likely (token id, logprob) pairs at `position`, most likely first; the chosen one competes."""
    if k <= 0:
        return []
    p0 = _chosen_probability(fingerprint, position, token_id)
    candidates = {token_id: p0}
    for j in range(1, 4 * k + 8):
        if len(candidates) > k:
            break
        alternative = (token_id + 1 + int(_unit(fingerprint, position, -j) * (vocab_size - 1))) % vocab_size
        share = 0.5 ** j * (0.5 + 0.5 * _unit(fingerprint, position, j))
        candidates.setdefault(alternative, (1.0 - p0) * share)
    ranked = sorted(candidates.items(), key=lambda item: (-item[1], item[0]))[:k]
    return [(tid, math.log(max(p, 1e-300))) for tid, p in ranked]
