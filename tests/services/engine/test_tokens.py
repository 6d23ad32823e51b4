import json
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings, strategies as st

from services.engine.prefix_cache import block_hashes
from services.engine.tokens import WordTokenizer, output_token, prompt_fingerprint, stream_key, token_at

VOCAB = 128_000


@given(st.lists(st.integers(0, VOCAB - 1), max_size=200))
def test_vocabulary_words_round_trip(ids):
    tokenizer = WordTokenizer(VOCAB)
    assert tokenizer.encode(tokenizer.decode(ids)) == ids


@pytest.mark.parametrize("token_id", [6399, 6400, 6400**2 - 1, 6400**2, 6400**3 + 17, 10**12])
def test_words_round_trip_at_every_spelling_length(token_id):
    # 6400 syllable pairs: one, two and three levels of pairs spell these.
    tokenizer = WordTokenizer(10**12 + 1)
    assert tokenizer.encode(tokenizer.decode([token_id, token_id - 1])) == [token_id, token_id - 1]


def test_stream_pieces_concatenate_to_the_decoded_text():
    tokenizer = WordTokenizer(VOCAB)
    ids = [0, 1, 79, 80, 6399, 6400, VOCAB - 1]
    pieces = [tokenizer.token_text(i) for i in ids]
    assert all(piece.endswith(" ") and " " not in piece[:-1] for piece in pieces)
    assert "".join(pieces) == tokenizer.decode(ids)
    assert len(set(pieces)) == len(ids)


def test_a_piece_that_is_no_word_is_one_token_per_utf8_byte_past_the_words():
    tokenizer = WordTokenizer(1000)
    first, more, marked = 1000, 1256, 1512
    assert tokenizer.encode("Hi, é") == [first + ord("H"), more + ord("i"), more + ord(","), first + 0xC3, more + 0xA9]
    assert tokenizer.size == 1768 and tokenizer.vocab_size == 1000
    # DEL before a piece marks its first byte: a cut word ("fo" from "fox") stays two byte tokens
    assert tokenizer.encode("\x7ffo") == [marked + ord("f"), more + ord("o")]
    assert tokenizer.detokenize([first + ord("f"), more + ord("o")]) == "\x7ffo"
    assert tokenizer.encode("##x") == [more + ord("x")]  # a continuation's own name is that token


def test_a_word_beyond_a_small_vocabulary_is_bytes_not_misread():
    big, small = WordTokenizer(VOCAB), WordTokenizer(100)
    word = big.token_text(5000).strip()
    assert small.encode(word) == [100 + word.encode()[0], *(356 + b for b in word.encode()[1:])]


@settings(deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=40))
def test_any_text_reads_back_as_as_many_tokens(text):
    tokenizer = WordTokenizer(VOCAB)
    ids = tokenizer.encode(text)
    assert all(0 <= i < tokenizer.size for i in ids)
    if "##" not in text:  # a typed "##x" is a continuation token, and joins the piece before it when decoded
        assert len(tokenizer.encode(tokenizer.detokenize(ids))) == len(ids)


@settings(deadline=None)
@given(st.text(alphabet=st.characters(codec="ascii"), max_size=40), st.data())
def test_ascii_text_cut_anywhere_reads_back_as_as_many_tokens(text, data):
    # A client building an N-token prompt cuts N ids out of a corpus and decodes them (guidellm, aiperf).
    tokenizer = WordTokenizer(VOCAB)
    ids = tokenizer.encode(text.replace("##", "#"))
    if ids:
        start = data.draw(st.integers(0, len(ids) - 1))
        end = data.draw(st.integers(start + 1, len(ids)))
        assert len(tokenizer.encode(tokenizer.detokenize(ids[start:end]))) == end - start


def test_output_tokens_depend_on_prompt_position_and_seed_only():
    fingerprint = prompt_fingerprint([5, 6, 7])
    stream = [output_token(fingerprint, position, seed=3, vocab_size=VOCAB) for position in range(200)]
    assert stream == [output_token(prompt_fingerprint([5, 6, 7]), p, 3, VOCAB) for p in range(200)]
    # Asked in any order, each position gives the same token.
    assert [output_token(fingerprint, p, 3, VOCAB) for p in reversed(range(200))] == stream[::-1]
    assert len(set(stream)) > 190  # well mixed, not a constant or a short cycle
    assert stream != [output_token(fingerprint, p, 4, VOCAB) for p in range(200)]
    assert stream != [output_token(prompt_fingerprint([5, 6, 8]), p, 3, VOCAB) for p in range(200)]


def test_precomputed_stream_key_gives_the_same_tokens():
    fingerprint = prompt_fingerprint(list(range(50)))
    key = stream_key(fingerprint, 9)
    assert [token_at(key, p, 500) for p in range(50)] == [output_token(fingerprint, p, 9, 500) for p in range(50)]


def test_fingerprint_sees_order_and_length():
    assert prompt_fingerprint([1, 2, 3]) != prompt_fingerprint([3, 2, 1])
    assert prompt_fingerprint([1, 2, 3]) != prompt_fingerprint([1, 2, 3, 0])


_IN_ANOTHER_PROCESS = """
import json
from services.engine.prefix_cache import block_hashes
from services.engine.tokens import WordTokenizer, output_token, prompt_fingerprint
fp = prompt_fingerprint(list(range(100)))
print(json.dumps([fp, output_token(fp, 17, 5, 32000), WordTokenizer(32000).encode("some text here"),
                  block_hashes(list(range(64)), 16)]))
"""


def test_hashes_and_tokens_are_the_same_in_another_process():
    env = dict(os.environ, PYTHONHASHSEED="12345")
    out = subprocess.run([sys.executable, "-c", _IN_ANOTHER_PROCESS], env=env, capture_output=True, text=True,
                         check=True, timeout=60)
    fingerprint = prompt_fingerprint(list(range(100)))
    expected = [fingerprint, output_token(fingerprint, 17, 5, 32000), WordTokenizer(32000).encode("some text here"),
                block_hashes(list(range(64)), 16)]
    assert json.loads(out.stdout) == expected


def test_vocabulary_must_have_room():
    with pytest.raises(ValueError, match="vocab_size"):
        WordTokenizer(1)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        WordTokenizer(10).token_text(10 + 768)  # past the words and the byte tokens


def test_remembered_pieces_map_as_fresh_ones_do_even_after_the_memory_is_cleared(monkeypatch):
    import services.engine.tokens as tokens
    monkeypatch.setattr(tokens, "_MEMO_PIECES", 4)
    text = "zebra " + WordTokenizer(500).decode(list(range(0, 500, 7))) + " Hello, zebra"
    remembering = WordTokenizer(500)
    first, again = remembering.encode(text), remembering.encode(text)
    assert first == again == [i for piece in text.split() for i in WordTokenizer(500)._piece_ids(piece)]
    assert len(remembering._ids) <= len(set(text.split()))
