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


def _position_key(fingerprint: int, position: int) -> int:
    """The hash state after (fingerprint, position): every value at one position starts from it."""
    return splitmix64(splitmix64(fingerprint & _MASK64) ^ (position & _MASK64))


def _unit(key: int, part: int) -> float:
    """A value in [0, 1) from a hash of (fingerprint, position, part), given the position's key."""
    return splitmix64(key ^ (part & _MASK64)) / _UNIT


def token_logprob(fingerprint: int, position: int, token_id: int) -> float:
    """Log-probability of `token_id` at `position` (negative positions are prompt tokens); always <= 0."""
    return math.log(math.exp(-3.0 * _unit(_position_key(fingerprint, position), token_id)))  # as documented: log p


def top_logprobs(fingerprint: int, position: int, token_id: int, k: int, vocab_size: int) -> list[tuple[int, float]]:
    """The `k` most likely (token id, logprob) pairs at `position`, most likely first; the chosen one competes."""
    return logprob_row(fingerprint, position, token_id, k, vocab_size)[1]


def logprob_row(fingerprint: int, position: int, token_id: int, k: int,
                vocab_size: int) -> tuple[float, list[tuple[int, float]]]:
    """(token_logprob, top_logprobs) of one position, its hash state computed once for both."""
    key = _position_key(fingerprint, position)
    p0 = math.exp(-3.0 * _unit(key, token_id))
    if k <= 0:
        return math.log(p0), []
    candidates = {token_id: p0}
    for j in range(1, 4 * k + 8):
        if len(candidates) > k:
            break
        alternative = (token_id + 1 + int(_unit(key, -j) * (vocab_size - 1))) % vocab_size
        share = 0.5 ** j * (0.5 + 0.5 * _unit(key, j))
        candidates.setdefault(alternative, (1.0 - p0) * share)
    ranked = sorted(candidates.items(), key=lambda item: (-item[1], item[0]))[:k]
    return math.log(p0), [(tid, math.log(max(p, 1e-300))) for tid, p in ranked]
