import math

import pytest

from services.engine.pool import InstancePool
from services.engine.prefix_cache import block_hashes
from tests.services.engine.conftest import fresh, prompt


def seed_cache(engine, ids):
    """Put `ids` in an engine's prefix cache as a finished request would leave it."""
    hashes = block_hashes(ids, engine.block_size)
    engine.cache.admit("seed", hashes, math.ceil(len(ids) / engine.block_size))
    engine.cache.commit("seed", hashes, len(hashes))
    engine.cache.release("seed")


def add_load(engine, count):
    for i in range(engine.load, engine.load + count):
        engine.submit(fresh(f"{engine.name}-load{i}", prompt(8, salt=i), generate=1))


async def test_prefers_the_instance_holding_the_longest_prefix(make_engine):
    engines = [await make_engine(start=False, name=f"e{i}") for i in range(3)]
    ids = prompt(320)
    seed_cache(engines[1], ids[:160])
    seed_cache(engines[2], ids[:320])
    add_load(engines[0], 0)
    add_load(engines[2], 3)  # a little busier than e0, not much
    choice = InstancePool(engines, balance_abs=8, balance_rel=1.5).choose(block_hashes(ids, 16))
    assert (choice.engine.name, choice.cached_tokens, choice.by_prefix) == ("e2", 320, True)


async def test_a_much_busier_prefix_holder_loses_to_the_least_loaded(make_engine):
    engines = [await make_engine(start=False, name=f"e{i}") for i in range(2)]
    ids = prompt(320)
    seed_cache(engines[1], ids)
    add_load(engines[0], 2)
    add_load(engines[1], 12)  # more than 2 + 8 and more than 1.5 x 2
    pool = InstancePool(engines, balance_abs=8, balance_rel=1.5)
    choice = pool.choose(block_hashes(ids, 16))
    assert (choice.engine.name, choice.cached_tokens, choice.by_prefix) == ("e0", 0, False)
    add_load(engines[0], 4)  # now 6 vs 12: not more than 6 + 8 above, so the prefix wins again
    assert pool.pick(ids).name == "e1"


async def test_without_any_prefix_the_least_loaded_wins_and_ties_go_first(make_engine):
    engines = [await make_engine(start=False, name=f"e{i}") for i in range(3)]
    add_load(engines[0], 2)
    pool = InstancePool(engines)
    assert pool.pick(prompt(64)).name == "e1"
    add_load(engines[1], 1)
    assert pool.pick(prompt(64)).name == "e2"


async def test_engines_of_a_pool_share_one_block_size(make_engine):
    with pytest.raises(ValueError, match="block size"):
        InstancePool([await make_engine(start=False, block_size=16), await make_engine(start=False, block_size=32)])
    with pytest.raises(ValueError, match="at least one"):
        InstancePool([])
