"""The table of held prompts keeps each for the call that names it, within its token and time bounds."""

from __future__ import annotations

import numpy as np
import pytest

from services.rpc.prompts import HeldPrompts, Prompt, PromptNotHeld


def _prompt(tokens: int, fingerprint: int = 7) -> Prompt:
    return Prompt(np.zeros(tokens, dtype="<u4"), [], fingerprint)


class _Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_a_held_prompt_is_taken_once_by_id_length_and_fingerprint():
    table = HeldPrompts(max_tokens=100)
    prompt = _prompt(10)
    table.hold("a", prompt)
    with pytest.raises(PromptNotHeld, match="another prompt"):
        table.take("a", 11, 7)  # another length
    with pytest.raises(PromptNotHeld, match="another prompt"):
        table.take("a", 10, 8)  # another fingerprint
    assert table.take("a", 10, 7) is prompt and table.tokens == 0
    with pytest.raises(PromptNotHeld, match="none under that id"):
        table.take("a", 10, 7)
    assert table.stats() == {"held_now": 0, "held_tokens": 0, "held": 1, "taken": 1, "expired": 0, "evicted": 0,
                             "refused": 3}


def test_the_token_bound_evicts_the_oldest_and_a_prompt_larger_than_it_is_not_held():
    table = HeldPrompts(max_tokens=100)
    for name in "abc":
        table.hold(name, _prompt(40))
    assert len(table) == 2 and table.tokens == 80 and table.evicted == 1
    with pytest.raises(PromptNotHeld):
        table.take("a", 40, 7)
    table.hold("huge", _prompt(101))
    assert len(table) == 2 and table.tokens == 80  # the naming call is refused and resends the ids
    table.hold("b", _prompt(30))  # a newer lookup of the same id replaces the older
    assert table.tokens == 70 and table.take("b", 30, 7)


def test_a_prompt_no_call_names_leaves_at_its_deadline():
    clock = _Clock()
    table = HeldPrompts(max_tokens=100, keep_s=5.0, now=clock)
    table.hold("a", _prompt(10))
    clock.t += 4.0
    table.hold("b", _prompt(10))
    clock.t += 1.5  # a's deadline has passed, b's has not
    assert table.take("b", 10, 7) and table.expired == 1 and len(table) == 0
