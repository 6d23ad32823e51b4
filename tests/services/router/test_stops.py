"""Stop rules cut the emulated output where vLLM would, and say how many tokens the mesh must generate."""

from __future__ import annotations

import random
import time

from services.engine.tokens import WordTokenizer
from services.router.stops import (
    FIRST_SLICE_TOKENS, LAST_SLICE_TOKENS, MAX_STOP_CHARS, MAX_STOPS, Ending, StopRules, StopScan, plan_ending,
)
from tests.tolerance import assert_at_most

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


def _rescanned(ids: list[int], max_tokens: int, rules: StopRules) -> Ending:
    """vLLM's rules read literally: after each token, every stop searched where it could end in that token."""
    text = ""
    for generated, token_id in enumerate(ids[:max_tokens], start=1):
        checked = generated >= rules.min_tokens
        if checked and token_id in rules.token_ids:
            return Ending(generated, "stop", token_id, len(text))
        before = len(text)
        text += TOK.token_text(token_id)
        found = [(i, s) for s in rules.strings if checked and (i := text.find(s, max(0, before - len(s) + 1))) >= 0]
        if found:
            at, which = min(found)
            return Ending(generated, "stop", which, at)
    return Ending(max_tokens, "length")


def test_the_sliced_scan_ends_every_output_where_a_full_rescan_would():
    draw = random.Random(7)
    for case in range(400):
        ids = [draw.randrange(TOK.vocab_size) for _ in range(draw.choice((5, 70, 300, 700)))]
        text = TOK.decode(ids)
        strings = []
        for _ in range(draw.randint(0, MAX_STOPS)):  # pieces of the text (some spanning slices), or absent ones
            at = draw.randrange(len(text))
            strings.append(text[at : at + draw.randint(1, 12)] if draw.random() < 0.7 else f"Q{case}Z")
        token_ids = frozenset(draw.sample(ids, draw.randint(0, 2)))
        rules = StopRules(tuple(strings), token_ids, draw.choice((0, 0, 3, 90)))
        max_tokens = draw.randint(1, len(ids))
        assert plan_ending(iter(ids), max_tokens, rules, TOK) == _rescanned(ids, max_tokens, rules), (case, rules)


def test_the_text_is_searched_once_plus_a_stop_length_per_slice_however_long_the_output():
    ids = [draw.randrange(TOK.vocab_size) for draw in [random.Random(3)] for _ in range(16_000)]
    longest = "Q" * MAX_STOP_CHARS
    scan = StopScan(iter(ids), len(ids), StopRules((longest, "Q0Z", "Q1Z", "Q2Z")), TOK)
    slices = 1
    while not scan.advance():
        slices += 1
    text_chars = len(TOK.decode(ids))
    assert scan.ending == Ending(16_000, "length")
    assert scan.searched_chars <= text_chars + slices * (MAX_STOP_CHARS - 1)
    assert slices <= 16_000 // LAST_SLICE_TOKENS + 8  # slices grow to LAST_SLICE_TOKENS: few overlaps


def test_the_issues_stop_attack_at_its_bounds_plans_in_a_fraction_of_a_second():
    """4 stops of the longest length over 8 outputs of 8000 tokens: the work the limits leave (was 20 s)."""
    rules = StopRules(("Q" * MAX_STOP_CHARS, "Q0Z", "Q1Z", "Q2Z"))
    outputs = [[draw.randrange(TOK.vocab_size) for _ in range(8000)] for draw in map(random.Random, range(8))]
    start = time.perf_counter()
    for ids in outputs:
        assert plan_ending(iter(ids), 8000, rules, TOK).finish_reason == "length"
    assert_at_most(time.perf_counter() - start, 2.0, "planning 8 x 8000 tokens against 4 stops")


def test_a_stop_string_across_the_edge_of_a_slice_is_found_where_it_ends():
    ids = [draw.randrange(TOK.vocab_size) for draw in [random.Random(5)] for _ in range(1000)]
    for edge in (FIRST_SLICE_TOKENS, 3 * FIRST_SLICE_TOKENS):  # the first two slices' last tokens
        before, after = TOK.decode(ids[:edge]), TOK.token_text(ids[edge])
        stop = before[-4:] + after[:3]  # the end of one slice's text and the start of the next
        assert stop not in before[:-4]  # its first occurrence is the one across the edge
        ending = plan_ending(iter(ids), 1000, StopRules((stop,)), TOK)
        assert ending == Ending(edge + 1, "stop", stop, len(before) - 4)
