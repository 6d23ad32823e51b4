"""A decode service's cache lookup and its admission pick the instance by one rule, and sizing follows it."""

from __future__ import annotations

from services.engine.sequence import Sequence
from services.launcher.plan import build_plan
from services.main_decode.server import DecodeService
from services.rpc import pb
from services.rpc.ids import pack_ids
from services.scenario import load_scenario
from tests.services.engine.conftest import prompt


def _service() -> DecodeService:
    from services.instances import RoleProcess

    plan = build_plan(load_scenario("pd-intra-mini", ()))
    return DecodeService(RoleProcess(plan, plan.service("decode")))  # two instances


def _cache(engine, ids: list[int], hashes: list[int]) -> None:
    blocks = len(ids) // engine.block_size
    assert engine.cache.admit("warm", hashes, blocks) is not None
    engine.cache.commit("warm", hashes, blocks)
    engine.cache.release("warm")


def _busy(engine) -> None:
    """Forty waiting requests: far past the pool's balance thresholds (16 sequences and 1.5x)."""
    for i in range(40):
        engine.submit(Sequence(f"busy{i}", prompt(64, salt=i + 1), prompt_len=64, kv_tokens=0, generate=1,
                               first_position=0, seed=0))


async def _looked_up(length: int, busy_holder: bool):
    """A two-instance decode service whose first instance caches a prompt; the lookup's reply for it."""
    service = _service()
    process = service.process
    packed = pack_ids(prompt(length))
    hashes = process.prompt(pb.CacheLookupRequest(prompt_ids=packed)).hashes
    _cache(process.engines[0], prompt(length), hashes)
    if busy_holder:
        _busy(process.engines[0])
    reply = await service.CacheLookup(pb.CacheLookupRequest(request_id="r", prompt_ids=packed), context=None)
    return process, hashes, reply


async def test_the_lookup_names_the_instance_admission_takes_and_what_that_instance_holds():
    # the prefix holder is far busier than the other: the pool's rule balances away from it
    process, hashes, reply = await _looked_up(4096, busy_holder=True)
    holder, idle = process.engines
    admitted = process.instance("", hashes)
    assert reply.instance == admitted.name == idle.name
    assert reply.hit_tokens == admitted.cached_prefix_tokens(hashes) == 0  # a transfer sized on idle's cache
    assert process.instance(reply.instance, hashes) is idle


async def test_generate_is_admitted_on_the_instance_the_lookup_named_even_when_loads_have_moved():
    process, hashes, reply = await _looked_up(2048, busy_holder=False)
    first, second = process.engines
    assert reply.instance == first.name and reply.hit_tokens == 2048
    _busy(first)  # between lookup and generate the named instance got busy
    assert process.instance("", hashes) is second  # the rule alone would now go elsewhere
    assert process.instance(reply.instance, hashes) is first  # the named instance, whose cache sized the transfer
