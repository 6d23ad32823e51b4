"""A role process hashes a prompt's blocks once for its lookup, instance choice and admission."""

from __future__ import annotations

import numpy as np
import pytest

from services.engine.prefix_cache import block_hashes
from services.engine.tokens import prompt_fingerprint
from services.instances import RoleProcess
from services.launcher.plan import build_plan
from services.rpc import pb
from services.rpc.ids import pack_ids
from services.rpc.prompts import PromptNotHeld
from services.scenario import load_scenario


async def test_a_lookup_hashes_the_prompt_once_and_the_call_naming_it_takes_it_as_is(monkeypatch):
    plan = build_plan(load_scenario("pd-intra-mini", ()))
    process = RoleProcess(plan, plan.service("decode"))
    calls = []
    monkeypatch.setattr("services.engine.prompt_memo.block_hashes", lambda ids, size: calls.append(len(ids)) or
                        block_hashes(ids, size))
    ids = np.arange(100, 1100)
    fingerprint = prompt_fingerprint(ids)
    reply = process.cache_lookup(pb.CacheLookupRequest(request_id="r", prompt_ids=pack_ids(ids),
                                                       prompt_fingerprint=fingerprint))
    assert reply.instance and calls == [1000]
    named = pb.GenerateRequest(request_id="r", held_prompt=pb.HeldPrompt(request_id="r", length=1000,
                                                                         fingerprint=fingerprint))
    prompt = process.prompt(named)
    assert calls == [1000] and prompt.hashes == block_hashes(list(range(100, 1100)), 16)
    assert prompt.fingerprint == fingerprint and prompt.ids.tolist() == ids.tolist()
    with pytest.raises(PromptNotHeld, match="prompt not held"):
        process.prompt(named)  # taken by the call that named it
    assert process.stats()["prompts"]["hashed"] == 1
    # the same ids again, under another request: found among the recent prompts, not hashed again
    again = process.prompt(pb.GenerateRequest(request_id="r2", prompt_ids=pack_ids(ids),
                                              prompt_fingerprint=fingerprint))
    assert calls == [1000] and again.hashes == prompt.hashes


async def test_a_call_naming_another_prompt_under_the_same_id_is_refused_not_served(monkeypatch):
    plan = build_plan(load_scenario("pd-intra-mini", ()))
    process = RoleProcess(plan, plan.service("decode"))
    ids = np.arange(64)
    process.cache_lookup(pb.CacheLookupRequest(request_id="r", prompt_ids=pack_ids(ids)))
    other = pb.HeldPrompt(request_id="r", length=64, fingerprint=prompt_fingerprint(ids[::-1]))
    with pytest.raises(PromptNotHeld, match="another prompt under that id"):
        process.prompt(pb.PrefillRequest(request_id="r", held_prompt=other))


def test_ids_sent_without_a_fingerprint_get_the_engines_own():
    plan = build_plan(load_scenario("pd-intra-mini", ()))
    process = RoleProcess(plan, plan.service("decode"))
    prompt = process.prompt(pb.GenerateRequest(prompt_ids=pack_ids([5, 6, 7])))
    assert prompt.fingerprint == prompt_fingerprint([5, 6, 7])
    with pytest.raises(ValueError, match="multiple of 4"):
        process.prompt(pb.GenerateRequest(prompt_ids=b"\x01\x02\x03"))


def test_load_is_the_tighter_of_running_cap_and_kv_blocks_held():
    plan = build_plan(load_scenario("pdd-mini", ()))
    process = RoleProcess(plan, plan.service("relay-decode"))
    assert process.load() == 0.0
    engine = process.engines[0]
    total = sum(e.cache.capacity_blocks for e in process.engines)
    held = engine.cache.capacity_blocks // 2
    # one long sequence's blocks, as admission takes them (no prefix hit)
    assert engine.cache.admit("long-context", list(range(held)), held) == 0
    sequences = sum(e.load for e in process.engines) / sum(e.config.running_cap for e in process.engines)
    assert sequences == 0.0 and process.load() == held / total
