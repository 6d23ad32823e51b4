"""A role process hashes a prompt's blocks once for its lookup, instance choice and admission."""

from __future__ import annotations

import numpy as np

from services.engine.prefix_cache import block_hashes
from services.instances import PROMPT_HASHES_KEPT, RoleProcess
from services.launcher.plan import build_plan
from services.rpc.ids import pack_ids, unpack_ids
from services.scenario import load_scenario


def test_prompt_hashes_are_computed_once_per_prompt_and_kept_for_recent_prompts(monkeypatch):
    plan = build_plan(load_scenario("pd-intra-mini", ()))
    process = RoleProcess(plan, plan.service("decode"))
    calls = []
    monkeypatch.setattr("services.instances.block_hashes", lambda ids, size: calls.append(len(ids)) or
                        block_hashes(ids, size))
    packed = pack_ids(np.arange(100, 1100))
    first = process.prompt_hashes(packed, unpack_ids(packed))
    again = process.prompt_hashes(bytes(packed), unpack_ids(packed))  # equal bytes, another object
    assert first is again and first == block_hashes(list(range(100, 1100)), 16) and calls == [1000]
    other = pack_ids([1, 2, 3] * 40)
    assert process.prompt_hashes(other, unpack_ids(other)) == block_hashes([1, 2, 3] * 40, 16)
    for n in range(PROMPT_HASHES_KEPT):
        process.prompt_hashes(pack_ids([n] * 32), unpack_ids(pack_ids([n] * 32)))
    process.prompt_hashes(packed, unpack_ids(packed))
    assert calls.count(1000) == 2  # forgotten after PROMPT_HASHES_KEPT newer prompts, then hashed again


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
