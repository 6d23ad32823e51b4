"""Where a request's output ends: `stop` strings, vLLM's `stop_token_ids` and `min_tokens`.

The emulated model's output is a pure function of (prompt, position, seed)
(services/engine/tokens.py), so the router knows before it submits a request at
which token a stop rule fires. It asks the mesh for exactly that many tokens:
the engines do the work a real server would do before it stopped, and the
`pdd` stats stay complete. The text is cut where the rule fired, by the same
rules vLLM applies (docs/mesh.md, "Stops"):
- a rule is checked only once `min_tokens` tokens exist;
- a stop string ends the text just before its first occurrence, and only an
  occurrence that ends in the newest token counts (older text was checked already);
- a stop token id ends the output without its text; both count as generated.
There is no end-of-sequence token, so `ignore_eos` has nothing to change.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from services.engine.tokens import WordTokenizer


@dataclass(frozen=True, slots=True)
class StopRules:
    strings: tuple[str, ...] = ()
    token_ids: frozenset[int] = frozenset()
    min_tokens: int = 0

    def active(self) -> bool:
        return bool(self.strings or self.token_ids)


@dataclass(frozen=True, slots=True)
class Ending:
    length: int  # tokens the mesh generates
    finish_reason: str  # "stop" or "length"
    stop_reason: str | int | None = None  # the stop string or token id that fired (vLLM's field)
    text_chars: int | None = None  # the output text is cut to this many characters; None keeps it whole

    def cut(self, text: str) -> str:
        return text if self.text_chars is None else text[: self.text_chars]


def plan_ending(output_ids: Iterable[int], max_tokens: int, rules: StopRules, tokenizer: WordTokenizer) -> Ending:
    """The ending of an output whose tokens are `output_ids` (at least `max_tokens` of them, lazily)."""
    if not rules.active():
        return Ending(max_tokens, "length")
    longest = max((len(s) for s in rules.strings), default=0)
    text = ""
    for generated, token_id in enumerate(output_ids, start=1):
        if generated > max_tokens:
            break
        checked = generated >= rules.min_tokens
        if checked and token_id in rules.token_ids:
            return Ending(generated, "stop", token_id, len(text))
        before = len(text)
        text += tokenizer.token_text(token_id)
        if checked and rules.strings:
            window = max(0, before - longest + 1)
            found = [(i, s) for s in rules.strings if (i := text.find(s, window)) >= 0]
            if found:
                at, which = min(found)
                return Ending(generated, "stop", which, at)
    return Ending(max_tokens, "length")
