"""A choice renders OpenAI's completion and chat shapes from its tokens, cut at its stop."""

from __future__ import annotations

from services.engine.tokens import WordTokenizer
from services.router.choices import Choice, LogprobAsk
from services.router.stops import Ending

TOK = WordTokenizer(1000)


def _choice(ending: Ending, ask: LogprobAsk = LogprobAsk(), ids=(3, 4, 5)) -> Choice:
    choice = Choice(2, "the prompt", [10, 11], ending, TOK, ask)
    for tid in ids:
        choice.add(tid)
    return choice


def test_streamed_pieces_never_pass_the_stop_cut():
    choice = Choice(0, "p", [1], Ending(3, "stop", "x", len(TOK.token_text(3)) + 1), TOK)
    pieces = [choice.add(t) for t in (3, 4, 5)]
    assert "".join(pieces) == choice.output_text() == TOK.token_text(3) + TOK.token_text(4)[:1]


def test_completion_shape_with_echo_and_logprobs():
    body = _choice(Ending(3, "length"), LogprobAsk(True, 2, echo=True)).completion()
    assert body["index"] == 2 and body["finish_reason"] == "length"
    assert body["text"] == "the prompt" + TOK.decode([3, 4, 5])
    lp = body["logprobs"]
    assert lp["tokens"] == [TOK.token_text(t) for t in (10, 11, 3, 4, 5)]
    assert lp["token_logprobs"][0] is None and all(v <= 0 for v in lp["token_logprobs"][1:])
    assert lp["top_logprobs"][0] is None and all(len(top) == 2 for top in lp["top_logprobs"][1:])
    assert lp["text_offset"] == [0, 3, 6, 9, 12]  # every pseudo-word here is one syllable plus a space


def test_chat_shape_with_logprobs_and_a_stop():
    body = _choice(Ending(3, "stop", 5, len(TOK.decode([3, 4]))), LogprobAsk(True, 3)).chat()
    assert body["message"] == {"role": "assistant", "content": TOK.decode([3, 4])}
    assert body["finish_reason"] == "stop" and body["stop_reason"] == 5
    content = body["logprobs"]["content"]
    assert [c["token"] for c in content] == [TOK.token_text(t) for t in (3, 4, 5)]
    assert all(c["bytes"] == list(c["token"].encode()) and len(c["top_logprobs"]) == 3 for c in content)


def test_no_logprobs_unless_asked():
    assert _choice(Ending(3, "length")).completion()["logprobs"] is None
    assert _choice(Ending(3, "length")).chat()["logprobs"] is None
