import random

import pytest

from loadgen.hitbins import HIT_BIN_LABELS, HitDistribution, hit_bin
from loadgen.plan import plan_offline
from loadgen.spec import parse_spec
from loadgen.tokens import offline_model_output
from loadgen.workloads import AgenticWorkload
from tests.tolerance import assert_close


def workload(spec: str, seed: int = 0) -> AgenticWorkload:
    return AgenticWorkload(parse_spec(spec), random.Random(seed))


def lcp(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def replay(spec: str, requests: int, concurrent: int = 4, seed: int = 0):
    """Plan offline and keep, per session, every sequence the stand-in server has seen."""
    source = workload(spec, seed)
    outputs: dict[str, list[int]] = {}

    def model(prompt, max_tokens):
        answer = offline_model_output(prompt, max_tokens)
        outputs[str(prompt[:8]) + str(len(prompt))] = answer
        return answer

    plans = plan_offline(source, model, requests, concurrent)
    return source, plans, outputs


def test_hit_rates_come_from_real_token_reuse():
    source, plans, outputs = replay("agentic:context=6K,initial=1K,output=20..60,turns=12,think=0", 200)
    seen: dict[str, list[list[int]]] = {}
    for plan in plans:
        history = seen.setdefault(plan.session, [])
        expected = max((lcp(plan.prompt, s) for s in history), default=0) / len(plan.prompt)
        assert plan.hit_rate == pytest.approx(expected), plan.request_id
        answer = outputs[str(plan.prompt[:8]) + str(len(plan.prompt))]
        history += [plan.prompt, plan.prompt + answer]
    # the generator's own report covers every turn it planned: those returned plus one pending per open session
    planned = source.hit_distribution()
    assert len(plans) <= planned.requests <= len(plans) + 4


def test_a_session_keeps_no_sequence_that_a_later_one_extends():
    # what the hits are measured against stays bounded by the history's compactions, not its turns;
    # the hits themselves are those of the whole history (the test above)
    source = workload("agentic:context=4K,initial=1K,output=20..60,turns=40,think=0")
    session = source.new_session()
    plan, turns = session.first_request(), 1
    while (plan := session.next_turn(plan.prompt, offline_model_output(plan.prompt, plan.max_tokens))) is not None:
        turns += 1
    kept = [s.tolist() for s in session._cached]
    assert turns == 40 and len(kept) < turns
    for i, shorter in enumerate(kept):
        for longer in kept[i + 1:]:
            assert not (len(shorter) <= len(longer) and lcp(shorter, longer) == len(shorter))


def test_next_turn_appends_the_received_output():
    source = workload("agentic:context=64K,initial=2K,output=30,turns=3,think=0,hits=0/0/0/0/0/0/1")
    session = source.new_session()
    first = session.first_request()
    received = list(range(100, 130))
    second = session.next_turn(first.prompt, received)
    assert second.prompt[: len(first.prompt)] == first.prompt
    assert second.prompt[len(first.prompt): len(first.prompt) + 30] == received
    assert second.hit_rate >= 0.995
    assert second.turn == 1 and second.session == first.session
    assert session.next_turn(second.prompt, received) is not None
    assert session.next_turn(second.prompt, received) is None  # three turns, then the session is over


def test_default_target_gives_mean_about_90_and_most_above_95():
    _, plans, _ = replay("agentic:context=8K,output=16..64,turns=40,think=0", 800, concurrent=8)
    dist = HitDistribution.of(p.hit_rate for p in plans)
    assert 0.86 <= dist.mean <= 0.94
    assert 0.70 <= dist.share_above(0.95) <= 0.80


def test_targets_are_reached_within_their_bins():
    _, plans, _ = replay("agentic:context=16K,output=16..64,turns=30,think=0", 400, concurrent=4)
    continuing = [p for p in plans if p.turn > 0]
    same_bin = sum(hit_bin(p.hit_rate) == hit_bin(p.target_hit_rate) for p in continuing)
    assert same_bin / len(continuing) >= 0.95


def test_custom_mix_and_context_ceiling():
    _, plans, _ = replay("agentic:context=4K,initial=3K,output=50..100,turns=50,think=0,hits=1/0/0/0/0/0/1", 300)
    assert max(p.prompt_tokens for p in plans) <= 4096
    shares = dict(zip(HIT_BIN_LABELS, HitDistribution.of(p.hit_rate for p in plans).shares))
    assert shares["0-90"] == pytest.approx(0.5, abs=0.03)
    assert shares["99.5-100"] == pytest.approx(0.5, abs=0.03)


def test_without_output_caching_outputs_count_as_misses():
    _, plans, _ = replay("agentic:context=64K,initial=4K,output=200,turns=5,think=0,cache_outputs=false", 40)
    by_session: dict[str, list] = {}
    for plan in plans:
        by_session.setdefault(plan.session, []).append(plan)
    for turns in by_session.values():
        for before, after in zip(turns, turns[1:]):
            assert after.hit_rate <= before.prompt_tokens / after.prompt_tokens + 1e-9


def test_natural_mode_appends_tool_results():
    _, plans, _ = replay("agentic:context=64K,initial=1K,output=10,tool=500,turns=4,think=0,hits=natural", 12, 1)
    assert [p.prompt_tokens for p in plans[:4]] == [1024, 1534, 2044, 2554]
    assert all(p.target_hit_rate is None for p in plans)


def test_same_seed_same_plans_and_sessions_limit():
    spec = "agentic:context=4K,output=10..20,turns=3,sessions=2,think=1s"
    _, first, _ = replay(spec, 100, seed=5)
    _, again, _ = replay(spec, 100, seed=5)
    _, other, _ = replay(spec, 100, seed=6)
    assert [p.prompt for p in first] == [p.prompt for p in again]
    assert [p.prompt for p in first] != [p.prompt for p in other]
    assert len(first) == 6  # two sessions of three turns, then the workload is exhausted
    assert all(p.think_s > 0 for p in first if p.turn > 0)
    assert all(10 <= p.max_tokens <= 20 for p in first)


def test_a_sessions_prompts_do_not_depend_on_the_order_sessions_send_in():
    # In a closed loop the order answers arrive in decides which session sends next; a request id
    # must name the same prompt whichever order that is, or two deployments see different work.
    spec = "agentic:context=8K,output=16..64,turns=12,think=0"

    def plans_by_id(order) -> dict[str, list[int]]:
        source = workload(spec, seed=3)
        sessions = [source.new_session() for _ in range(3)]
        pending = [s.first_request() for s in sessions]
        prompts = {}
        for index in order:
            plan = pending[index]
            if plan is None:
                continue
            prompts[plan.request_id] = plan.prompt
            pending[index] = sessions[index].next_turn(plan.prompt, offline_model_output(plan.prompt, plan.max_tokens))
        return prompts

    in_turn = plans_by_id([0, 1, 2] * 12)
    one_after_another = plans_by_id([0] * 12 + [1] * 12 + [2] * 12)
    assert len(in_turn) == 36
    assert in_turn == one_after_another


def test_a_joining_users_first_session_is_the_rest_of_one_in_progress():
    stationary, fresh = workload("agentic:turns=20"), workload("agentic:turns=20,join=fresh")
    joined = [stationary.new_session(joining=True).turns for _ in range(2000)]
    assert min(joined) == 1 and max(joined) == 20
    assert_close(sum(joined) / len(joined), 10.5, rel=0.05, what="mean turns of a joining session")
    assert [stationary.new_session().turns for _ in range(50)] == [20] * 50  # later sessions are whole
    assert [fresh.new_session(joining=True).turns for _ in range(50)] == [20] * 50
