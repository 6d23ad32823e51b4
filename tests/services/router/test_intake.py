"""The router's check of a token-id prompt: what it accepts, what it refuses and how it says so."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st
from pydantic import ValidationError

from services.router.api import CompletionRequest
from services.router.intake import PromptIds, check_ids, load_json
from services.rpc.ids import unpack_ids

VOCAB = 129_280


@given(st.lists(st.integers(0, VOCAB - 1), min_size=1, max_size=300))
def test_valid_ids_are_kept_in_order_and_packed_once(ids):
    prompt = check_ids(ids, VOCAB)
    assert prompt.ids.tolist() == ids and len(prompt) == len(ids)
    assert unpack_ids(prompt.packed).tolist() == ids


def test_the_vocabulary_edges():
    assert check_ids([0, VOCAB - 1], VOCAB).ids.tolist() == [0, VOCAB - 1]
    with pytest.raises(ValueError, match=rf"0\.\.{VOCAB - 1}: got {VOCAB} at `prompt\[1\]`"):
        check_ids([0, VOCAB], VOCAB)


@pytest.mark.parametrize("ids, where, what", [
    ([5, -1], 1, "-1"),
    ([1, 2, True], 2, "bool"),
    ([False], 0, "bool"),
    ([3, 4.0], 1, "float"),
    ([0.5], 0, "float"),
    (["12"], 0, "str"),
    ([1, None], 1, "null"),
    ([1, [2]], 1, "array"),
    ([1, {"id": 2}], 1, "object"),
    ([1, 2, 2**64], 2, str(2**64)),
    ([2**200], 0, str(2**200)),
])
def test_bad_ids_name_the_item_and_the_allowed_range(ids, where, what):
    with pytest.raises(ValueError) as caught:
        check_ids(ids, VOCAB)
    message = str(caught.value)
    assert f"0..{VOCAB - 1}" in message and f"prompt[{where}]" in message and what in message, message


def test_an_empty_list_is_refused():
    with pytest.raises(ValueError, match="empty"):
        check_ids([], VOCAB)


def test_one_bad_id_anywhere_in_a_long_prompt_is_found():
    ids = list(range(61_440))
    ids[45_678] = True
    with pytest.raises(ValueError, match=r"bool.*prompt\[45678\]"):
        check_ids(ids, VOCAB)
    ids[45_678] = VOCAB + 3
    with pytest.raises(ValueError, match=rf"{VOCAB + 3} at `prompt\[45678\]`"):
        check_ids(ids, VOCAB)


def test_the_request_schema_parses_ids_and_names_the_served_vocabulary():
    body = {"model": "m", "prompt": [1, 2, 99]}
    assert CompletionRequest.model_validate(body, context={"vocab_size": 50}).prompt.tolist() == [1, 2, 99]
    with pytest.raises(ValidationError, match=r"0\.\.49: Expected `int`, got `bool` - at `prompt\[1\]`"):
        CompletionRequest.model_validate({"model": "m", "prompt": [1, True]}, context={"vocab_size": 50})
    with pytest.raises(ValidationError, match="empty"):
        CompletionRequest.model_validate({"model": "m", "prompt": []})
    assert CompletionRequest.model_validate({"model": "m", "prompt": "hi"}).prompt == "hi"
    with pytest.raises(ValidationError):
        CompletionRequest.model_validate({"model": "m", "prompt": 7})


def test_tokenizer_ids_become_a_prompt_without_a_check():
    assert PromptIds.of([3, 1, 2]).ids.dtype == np.dtype("<u4")


def test_bodies_parse_as_json_did_before():
    assert load_json(b'{"prompt": [1, 2], "model": "m"}') == {"prompt": [1, 2], "model": "m"}
    assert load_json(b'{"prompt": "\\ud800"}') == {"prompt": "\ud800"}  # refused later, as text that is not Unicode
    assert load_json(b"[1e400]") == [float("inf")]
    with pytest.raises(ValueError, match="Expecting"):
        load_json(b"{not json")
