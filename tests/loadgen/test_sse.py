import json

import pytest

from loadgen.sse import SseLineDecoder, StreamError, StreamTally
from loadgen.tokens import text_token_ids
from services.engine.tokens import WordTokenizer


def chunk(text: str, ids=None, finish=None, **extra) -> str:
    choice = {"index": 0, "text": text, "finish_reason": finish}
    if ids is not None:
        choice["token_ids"] = ids
    return json.dumps({"choices": [choice], **extra})


def test_decoder_joins_data_lines_and_skips_comments():
    decoder = SseLineDecoder()
    lines = [": keep-alive", 'data: {"a":', "data: 1}", "", "", "data:[DONE]\r\n", ""]
    events = [decoder.feed(line) for line in lines]
    assert [e for e in events if e is not None] == ['{"a":\n1}', "[DONE]"]


def test_tally_times_tokens_and_reads_the_final_stats():
    tally = StreamTally(sent_at=10.0)
    tally.feed_event(chunk("a ", [5]), 10.5)
    tally.feed_event(chunk("b ", [6]), 10.7)
    tally.feed_event(chunk("c ", [7]), 11.0)
    tally.feed_event(chunk("", [], "length", usage={"completion_tokens": 3}, pdd={"pipeline": "P-MD"}), 11.05)
    tally.feed_event("[DONE]", 11.1)
    tally.check_complete()
    assert tally.output_ids == [5, 6, 7]
    assert tally.ttft_s == pytest.approx(0.5)
    assert tally.itl_s == pytest.approx([0.2, 0.3])
    assert tally.e2e_s == pytest.approx(1.1)
    assert tally.tpot_s == pytest.approx((1.1 - 0.5) / 2)
    assert tally.pdd == {"pipeline": "P-MD"} and tally.usage == {"completion_tokens": 3}
    assert tally.finish_reason == "length"


def test_text_without_ids_decodes_the_emulator_words_exactly():
    words = WordTokenizer(200_000)
    tally = StreamTally(sent_at=0.0, vocab=1000)
    tally.feed_event(chunk(words.token_text(123_456)), 1.0)  # above the workload's vocabulary: still exact
    tally.feed_event(chunk(words.token_text(7), finish="length"), 2.0)
    assert tally.output_ids == [123_456, 7]
    assert tally.tpot_s == pytest.approx(1.0)


def test_other_text_maps_to_stable_ids_inside_the_vocabulary():
    ids = text_token_ids("Hello world!", 1000)
    assert len(ids) == 2 and all(0 <= i < 1000 for i in ids)
    assert ids == text_token_ids("Hello world!", 1000) and ids[0] != ids[1]
    assert text_token_ids("  ", 1000) == []


def test_single_token_has_no_tpot():
    tally = StreamTally(sent_at=0.0)
    tally.feed_event(chunk("x", [1], "length"), 1.0)
    assert tally.tpot_s is None and tally.ttft_s == 1.0


def test_error_event_and_broken_streams_raise():
    tally = StreamTally(sent_at=0.0)
    with pytest.raises(StreamError, match="instance died"):
        tally.feed_event(json.dumps({"error": {"message": "instance died", "type": "server_error"}}), 1.0)
    truncated = StreamTally(sent_at=0.0)
    truncated.feed_event(chunk("a", [1]), 1.0)
    with pytest.raises(StreamError, match="before the final chunk"):
        truncated.check_complete()
    with pytest.raises(StreamError, match="unreadable"):
        StreamTally(sent_at=0.0).feed_event("{not json", 1.0)
