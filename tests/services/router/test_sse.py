"""The router's SSE chunks: byte templates that read back as vLLM's stream shape."""

from __future__ import annotations

import json

from services.engine.tokens import WordTokenizer, output_token, prompt_fingerprint
from services.router.sse import DONE, ChunkEncoder, response_id


def _data(chunk: bytes) -> dict:
    assert chunk.startswith(b"data: ") and chunk.endswith(b"\n\n"), chunk
    return json.loads(chunk[len(b"data: "):])


def test_completion_token_chunk_is_the_openai_shape_with_a_cmpl_id():
    chunk = _data(ChunkEncoder("r1", 1700000000, "llama3-8b", chat=False).token("gituri "))
    assert chunk == {"id": "cmpl-r1", "object": "text_completion", "created": 1700000000, "model": "llama3-8b",
                     "choices": [{"index": 0, "text": "gituri ", "logprobs": None, "finish_reason": None}]}


def test_only_the_first_chat_delta_names_the_assistant_role():
    chunks = ChunkEncoder("r2", 5, "m", chat=True)
    first, second = _data(chunks.token("a ", first=True)), _data(chunks.token("b "))
    assert first["id"] == second["id"] == "chatcmpl-r2" and first["object"] == "chat.completion.chunk"
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": "a "}
    assert second["choices"][0]["delta"] == {"content": "b "}
    assert second["choices"][0]["finish_reason"] is None


def test_text_that_needs_escaping_survives_the_template():
    for text in ['say "hi" ', "back\\slash ", "tab\tnewline\n ", "naïve 日本 "]:
        assert _data(ChunkEncoder("r", 0, "m", chat=False).token(text))["choices"][0]["text"] == text


def test_finish_chunk_ends_the_choice_and_usage_chunk_has_no_choices():
    chunks = ChunkEncoder("r3", 0, "m", chat=True)
    finish = _data(chunks.finish("length", {"pipeline": "P-D"}))
    assert finish["choices"] == [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": "length"}]
    assert finish["pdd"] == {"pipeline": "P-D"} and "usage" not in finish
    usage = _data(chunks.usage(4, 3, 2))
    assert usage["choices"] == [] and usage["usage"] == {"prompt_tokens": 4, "completion_tokens": 3,
                                                         "total_tokens": 7, "prompt_tokens_details": {"cached_tokens": 2}}
    assert DONE == b"data: [DONE]\n\n"


def test_streamed_text_is_the_engines_deterministic_text_byte_for_byte():
    """The chunks of a request concatenate to exactly the words the engine's token generator spells."""
    tokenizer, prompt, seed = WordTokenizer(128256), [5, 6, 7, 8], 7
    ids = [output_token(prompt_fingerprint(prompt), i, seed, 128256) for i in range(50)]
    chunks = ChunkEncoder("r4", 0, "m", chat=False)
    streamed = "".join(_data(chunks.token(tokenizer.token_text(t), first=i == 0))["choices"][0]["text"]
                       for i, t in enumerate(ids))
    assert streamed.encode() == tokenizer.decode(ids).encode()


def test_continuous_usage_is_in_every_chunk_in_vllms_field_order():
    chunks = ChunkEncoder("r4", 0, "m", chat=False, usage_prompt=7)
    token = chunks.counted(chunks.token("a "), 1)
    assert token.endswith(b'"usage":{"prompt_tokens":7,"total_tokens":8,"completion_tokens":1}}\n\n')
    assert _data(token)["choices"][0]["text"] == "a "
    finish = _data(chunks.counted(chunks.finish("length", {"pipeline": "P-D"}), 3))
    assert finish["usage"] == {"prompt_tokens": 7, "total_tokens": 10, "completion_tokens": 3}
    plain = ChunkEncoder("r5", 0, "m", chat=False)
    assert plain.counted(plain.token("a "), 1) == plain.token("a ")  # not asked: the chunk as it was


def test_answer_ids_carry_their_kind_prefix():
    # the prefix the unstreamed answers take too (services/router/whole.py)
    assert response_id("r5", True) == "chatcmpl-r5" and response_id("r5", False) == "cmpl-r5"


def test_a_token_chunk_can_carry_its_logprobs():
    chunks = ChunkEncoder("r4", 0, "m", chat=True)
    first = _data(chunks.token_logprobs("ba ", {"content": [{"token": "ba ", "logprob": -0.5}]}, first=True))
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": "ba "}
    assert first["choices"][0]["logprobs"]["content"][0]["logprob"] == -0.5
    plain = _data(ChunkEncoder("r4", 0, "m", chat=False).token_logprobs("be ", {"tokens": ["be "]}))
    assert plain["choices"][0]["text"] == "be " and plain["choices"][0]["logprobs"] == {"tokens": ["be "]}


def test_every_chunk_of_a_choice_names_its_index():
    chat, text = ChunkEncoder("r4", 0, "m", chat=True, index=3), ChunkEncoder("r4", 0, "m", chat=False, index=2)
    assert _data(chat.token("a ", first=True))["choices"][0]["index"] == 3
    assert _data(chat.token("b "))["choices"][0]["index"] == 3
    assert _data(chat.token_logprobs("c ", {"content": []}))["choices"][0]["index"] == 3
    assert _data(chat.finish("stop", {}))["choices"][0]["index"] == 3
    assert _data(text.token("d "))["choices"][0]["index"] == 2 and _data(text.finish("length", {}))["choices"][0][
        "index"] == 2


def _spelled_digit_by_digit(token_id: int) -> str:
    """The spelling written out: base 80, one consonant-vowel syllable per digit, most significant first."""
    syllables = [c + v for c in "bdfghjklmnprstvz" for v in "aeiou"]
    digits = []
    while True:
        token_id, digit = divmod(token_id, len(syllables))
        digits.append(syllables[digit])
        if token_id == 0:
            return "".join(reversed(digits)) + " "


def test_a_chunk_spelled_on_first_use_has_the_bytes_of_the_whole_vocabulary_spelled_up_front():
    vocab = 128_256
    eager = WordTokenizer(vocab)
    spelled = {token_id: eager.token_text(token_id) for token_id in range(vocab)}  # every word, in order
    ids = [0, 1, 79, 80, 81, 6399, 6400, 6401, 77_777, 511_999 % vocab, vocab - 1]
    lazy = WordTokenizer(vocab)  # asked for a few ids only, out of order
    chunks = ChunkEncoder("r9", 7, "llama3-8b", chat=False)
    for token_id in reversed(ids):
        assert lazy.token_text(token_id) == spelled[token_id] == _spelled_digit_by_digit(token_id)
        assert chunks.token(lazy.token_text(token_id)) == chunks.token(spelled[token_id])
        assert _data(chunks.token(lazy.token_text(token_id)))["choices"][0]["text"] == _spelled_digit_by_digit(token_id)
    assert all(spelled[i] == _spelled_digit_by_digit(i) for i in range(0, vocab, 97))
    big = WordTokenizer(2**31)  # past three syllables: the pair tables recurse
    assert big.token_text(2**31 - 1) == _spelled_digit_by_digit(2**31 - 1)
    assert big.token_text(512_000) == _spelled_digit_by_digit(512_000)
