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

The output is read a slice of tokens at a time (`StopScan`), and each slice's text
is searched together with the last `longest stop - 1` characters before it, never
the whole text again: a token costs O(1) however long the output, and a caller on
an event loop lets others run between slices.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from itertools import accumulate, islice
from typing import Iterable, Iterator

from services.engine.tokens import WordTokenizer

# What one request may ask for (docs/mesh.md, "API conformance"). OpenAI's API takes at most 4 stop
# sequences; it names no length, so each is held to 1000 characters, the bound Amazon Bedrock's
# TextInferenceConfig puts on a stop sequence. 256 stop token ids cover every special token a
# tokenizer reserves (Llama 3 reserves 256), all that a client could mean to stop on.
MAX_STOPS = 4
MAX_STOP_CHARS = 1000
MAX_STOP_TOKEN_IDS = 256
# Tokens read per slice: the first is small because most stop rules fire early; later ones double, so
# the characters searched twice (the overlap before each slice) stay a small share of the text.
FIRST_SLICE_TOKENS = 64
LAST_SLICE_TOKENS = 1024


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


class StopScan:
    """The ending of one output, found by reading its tokens a slice at a time (`advance`)."""

    def __init__(self, output_ids: Iterable[int], max_tokens: int, rules: StopRules,
                 tokenizer: WordTokenizer) -> None:
        self._ids: Iterator[int] = iter(output_ids)
        self._max_tokens, self._rules, self._tokenizer = max_tokens, rules, tokenizer
        self._overlap = max((len(s) for s in rules.strings), default=1) - 1
        self._read = 0  # tokens read so far
        self._chars = 0  # characters of their text
        self._tail = ""  # the last `_overlap` characters of that text
        self._slice = FIRST_SLICE_TOKENS
        self.searched_chars = 0  # characters of every window searched: O(text), never O(text^2)
        self.ending: Ending | None = None if rules.active() else Ending(max_tokens, "length")

    def advance(self) -> bool:
        """Read the next slice of the output; True once the ending is known (then see `ending`)."""
        if self.ending is not None:
            return True
        ids = list(islice(self._ids, min(self._slice, self._max_tokens - self._read)))
        self._slice = min(2 * self._slice, LAST_SLICE_TOKENS)
        if ids:
            self.ending = self._scan(ids)
        if self.ending is None and (not ids or self._read >= self._max_tokens):
            self.ending = Ending(self._max_tokens, "length")
        return self.ending is not None

    def _scan(self, ids: list[int]) -> Ending | None:
        rules, first = self._rules, self._read + 1  # `first`: the generated count of ids[0]
        checked_from = max(0, rules.min_tokens - first)  # the first index a rule may fire at
        by_id = next((k for k in range(checked_from, len(ids)) if ids[k] in rules.token_ids), None) \
            if rules.token_ids else None
        pieces = [self._tokenizer.token_text(t) for t in ids]
        ends = list(accumulate(map(len, pieces)))  # each piece's end, in characters from the slice's start
        window = self._tail + "".join(pieces)  # the slice's text and the tail an occurrence may start in
        self.searched_chars += len(window)
        by_string = self._first_string(window, ends, checked_from) if rules.strings else None
        if by_id is not None and (by_string is None or by_id <= by_string[0]):  # an id is checked first
            return Ending(first + by_id, "stop", ids[by_id], self._chars + (ends[by_id - 1] if by_id else 0))
        if by_string is not None:
            k, at, which = by_string
            return Ending(first + k, "stop", which, self._chars - len(self._tail) + at)
        self._read += len(ids)
        self._chars += ends[-1]
        self._tail = window[max(0, len(window) - self._overlap):]
        return None

    def _first_string(self, window: str, ends: list[int], checked_from: int) -> tuple[int, int, str] | None:
        """(piece index, start in the window, string) of the stop string that ends in the earliest piece."""
        if checked_from >= len(ends):
            return None
        shift = len(self._tail)
        # An occurrence counts where it ends in a checked piece: past the end of the piece before it.
        floor = shift + (ends[checked_from - 1] if checked_from else 0)
        found = []
        for s in self._rules.strings:
            at = window.find(s, max(0, floor - len(s) + 1))
            if at >= 0:
                found.append((bisect_left(ends, at + len(s) - shift), at, s))
        return min(found) if found else None


def plan_ending(output_ids: Iterable[int], max_tokens: int, rules: StopRules, tokenizer: WordTokenizer) -> Ending:
    """The ending of an output whose tokens are `output_ids` (at least `max_tokens` of them, lazily)."""
    scan = StopScan(output_ids, max_tokens, rules, tokenizer)
    while not scan.advance():
        pass
    return scan.ending
