"""Stop rules cut the emulated output where vLLM would, and say how many tokens the mesh must generate."""

from __future__ import annotations

from services.engine.tokens import WordTokenizer
from services.router.stops import StopRules, plan_ending

TOK = WordTokenizer(1000)
IDS = [5, 17, 42, 99, 7, 300, 42, 8]  # words: "ba bi " ... (token_text adds one space each)
TEXT = TOK.decode(IDS)


def test_without_rules_the_output_runs_to_max_tokens():
    ending = plan_ending(iter(IDS), 6, StopRules(), TOK)
    assert (ending.length, ending.finish_reason, ending.cut(TEXT)) == (6, "length", TEXT)


def test_a_stop_string_cuts_before_its_first_occurrence():
    stop = TOK.token_text(42).strip()
    ending = plan_ending(iter(IDS), 8, StopRules(strings=(stop,)), TOK)
    assert ending.finish_reason == "stop" and ending.stop_reason == stop
    assert ending.length == 3  # the third token carried it; the mesh need not decode further
    assert ending.cut(TEXT) == TOK.decode(IDS[:2])


def test_a_stop_string_spanning_two_tokens_is_found():
    stop = TOK.token_text(17)[-2:] + TOK.token_text(42)[:2]  # end of one word, the space, start of the next
    ending = plan_ending(iter(IDS), 8, StopRules(strings=(stop,)), TOK)
    assert ending.length == 3 and TEXT.startswith(ending.cut(TEXT)) and stop not in ending.cut(TEXT)
    assert ending.cut(TEXT) + stop == TEXT[: len(ending.cut(TEXT)) + len(stop)]


def test_the_earliest_of_several_stop_strings_wins():
    late, early = TOK.token_text(300).strip(), TOK.token_text(99).strip()
    ending = plan_ending(iter(IDS), 8, StopRules(strings=(late, early)), TOK)
    assert ending.stop_reason == early and ending.length == 4


def test_a_stop_token_ends_the_output_without_its_text():
    ending = plan_ending(iter(IDS), 8, StopRules(token_ids=frozenset({99})), TOK)
    assert (ending.length, ending.stop_reason, ending.cut(TEXT)) == (4, 99, TOK.decode(IDS[:3]))


def test_min_tokens_defers_every_rule():
    rules = StopRules(strings=(TOK.token_text(42).strip(),), token_ids=frozenset({17}), min_tokens=4)
    ending = plan_ending(iter(IDS), 8, rules, TOK)
    assert ending.length == 7 and ending.cut(TEXT) == TOK.decode(IDS[:6])  # the second 42, at token 7


def test_a_rule_that_never_fires_leaves_the_length():
    ending = plan_ending(iter(IDS), 8, StopRules(strings=("zzzz",)), TOK)
    assert (ending.length, ending.finish_reason, ending.text_chars) == (8, "length", None)
