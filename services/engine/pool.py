"""The instances one role process hosts, and which of them takes a request.

Rule (docs/engine.md, "Instance pool"): go to the instance holding the longest
cached prefix, unless it is much busier than the least-loaded instance, i.e.
its load exceeds the least load by more than `balance_abs` sequences AND by a
factor of more than `balance_rel`; then go to the least-loaded one. Ties go to
the lower load, then to the earlier instance, so the choice is deterministic.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from services.engine.prefix_cache import block_hashes
from services.engine.scheduler import Engine
from services.types import TokenId


@dataclass(frozen=True, slots=True)
class PoolChoice:
    engine: Engine
    cached_tokens: int  # prefix of the request already cached on that engine
    by_prefix: bool  # False when load balancing overrode the prefix preference


class InstancePool:
    def __init__(self, engines: Sequence[Engine], balance_abs: int = 16, balance_rel: float = 1.5) -> None:
        if not engines:
            raise ValueError("an instance pool needs at least one engine")
        sizes = {engine.block_size for engine in engines}
        if len(sizes) != 1:
            raise ValueError(f"engines of one pool must share a KV block size, got {sorted(sizes)}")
        if balance_abs < 0 or balance_rel < 1.0:
            raise ValueError("balance_abs must be >= 0 and balance_rel >= 1")
        self.engines = tuple(engines)
        self.block_size = sizes.pop()
        self.balance_abs = balance_abs
        self.balance_rel = balance_rel

    def __len__(self) -> int:
        return len(self.engines)

    def __iter__(self) -> Iterator[Engine]:
        return iter(self.engines)

    def pick(self, context_ids: list[TokenId]) -> Engine:
        return self.choose(block_hashes(context_ids, self.block_size)).engine

    def choose(self, hashes: list[int]) -> PoolChoice:
        """Pick by prefix and load from the request's block hashes (computed once by the caller)."""
        candidates = [(e.cached_prefix_tokens(hashes), e.load, index) for index, e in enumerate(self.engines)]
        best_prefix = min(candidates, key=lambda c: (-c[0], c[1], c[2]))
        least_loaded = min(candidates, key=lambda c: (c[1], -c[0], c[2]))
        prefix_load, least_load = best_prefix[1], least_loaded[1]
        much_busier = prefix_load > least_load + self.balance_abs and prefix_load > least_load * self.balance_rel
        chosen = least_loaded if much_busier else best_prefix
        return PoolChoice(self.engines[chosen[2]], chosen[0], by_prefix=chosen is best_prefix)

    async def start(self) -> None:
        for engine in self.engines:
            await engine.start()

    async def stop(self) -> None:
        """Stop in reverse order of start; every engine is stopped even if one fails."""
        errors: list[BaseException] = []
        for engine in reversed(self.engines):
            try:
                await engine.stop()
            except Exception as exc:  # collected and re-raised below, after the others stop
                errors.append(exc)
        if errors:
            raise errors[0]
