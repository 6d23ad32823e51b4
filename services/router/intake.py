"""A prompt's intake at the router: the body parsed and the ids checked in C, packed once for every RPC.

The body is parsed by msgspec (about 2.5x faster than the json module on a list
of ids). Ids arrive as a JSON list: msgspec checks that every item is an integer (a
bool, float, string or null is not) in C, numpy checks the range, and the
prompt then lives as one uint32 array whose packed bytes every RPC reuses
(services/rpc/ids.py). Nothing here loops over the ids in Python; the measured
cost per prompt length is in docs/mesh.md ("Intake").
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import msgspec
import numpy as np

from services.rpc.ids import ID_DTYPE, pack_ids


@dataclass(frozen=True, eq=False)
class PromptIds:
    """A checked prompt: its ids as uint32 and, computed once, their wire form."""

    ids: np.ndarray
    packed: bytes = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "packed", pack_ids(self.ids))

    def __len__(self) -> int:
        return len(self.ids)

    @classmethod
    def of(cls, ids: list[int] | np.ndarray) -> PromptIds:
        """From ids already known to be valid (the tokenizer's)."""
        return cls(np.asarray(ids, dtype=ID_DTYPE))


def load_json(raw: bytes) -> object:
    """The JSON value of a request body; ValueError (or RecursionError) when it is not JSON."""
    try:
        return msgspec.json.decode(raw)
    except msgspec.MsgspecError:
        # Only bodies msgspec refuses take this path, so they get the json module's messages, and what it
        # accepts and msgspec does not (a lone surrogate, NaN) meets the schema's checks as before.
        return json.loads(raw)


def allowed(vocab_size: int) -> str:
    return f"prompt token ids must be integers in 0..{vocab_size - 1}"


def parse_ids(values: object, vocab_size: int) -> np.ndarray:
    """A JSON `prompt` list as int64, or ValueError naming the first item that is not an integer.

    The range is checked apart (checked_ids), after the router has compared the length with the context.
    """
    try:
        ints = msgspec.convert(values, list[int])
    except msgspec.ValidationError as exc:  # e.g. "Expected `int`, got `bool` - at `$[1]`"
        raise ValueError(f"{allowed(vocab_size)}: {str(exc).replace('`$', '`prompt')}") from None
    if not ints:
        raise ValueError("prompt is empty")
    try:
        return np.fromiter(ints, dtype=np.int64, count=len(ints))
    except OverflowError:  # past 64 bits: far out of range, and rare enough to find in Python
        bad = next(i for i, t in enumerate(ints) if not -2**63 <= t < 2**63)
        raise ValueError(f"{allowed(vocab_size)}: got {ints[bad]} at `prompt[{bad}]`") from None


def checked_ids(array: np.ndarray, vocab_size: int) -> PromptIds:
    """parse_ids' array as a prompt, or ValueError naming the first id outside the vocabulary."""
    outside = (array < 0) | (array >= vocab_size)
    if outside.any():
        bad = int(outside.argmax())
        raise ValueError(f"{allowed(vocab_size)}: got {array[bad]} at `prompt[{bad}]`")
    return PromptIds(array.astype(ID_DTYPE))


def check_ids(values: object, vocab_size: int) -> PromptIds:
    """The ids of a JSON `prompt` list, or ValueError naming the first bad item and the allowed range."""
    return checked_ids(parse_ids(values, vocab_size), vocab_size)
