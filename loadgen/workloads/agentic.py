"""Agentic sessions: multi-turn prompts that grow from the previous prompt, its answer and a new message.

Each turn's new-token count is chosen to reach a target prefix-hit rate
(new = context x (1 - hit), docs/loadgen.md), so reuse comes from real token
ids. A target the session cannot reach by appending (a low hit, or a context
past the ceiling) compacts the history: the head is kept, the rest replaced,
as long sessions do when they summarise or drop old tool output.
"""

from __future__ import annotations

import math
import random
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from loadgen.hitbins import DEFAULT_HIT_WEIGHTS, HitDistribution, HitWeights, SessionHitTargets
from loadgen.lengths import Duration, LengthDist, TokenCount
from loadgen.plan import RequestPlan
from loadgen.tokens import DEFAULT_VOCAB, common_prefix_length, fresh_tokens


class AgenticConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["agentic"] = "agentic"
    context: TokenCount = Field(65536, description="ceiling of a session's prompt; longer histories are compacted")
    initial: LengthDist | None = Field(None, description="first-turn prompt length (default: a quarter of context)")
    output: LengthDist = Field(LengthDist.model_validate("32..480"), description="output tokens per turn")
    think: Duration = Field(1.0, description="mean pause (exponential) between an answer and the next turn")
    tool: LengthDist = Field(LengthDist.model_validate("exp1K"), description="tool-result size when hits=natural")
    turns: LengthDist = Field(LengthDist.model_validate("20"), description="turns per session")
    sessions: int = Field(0, ge=0, description="sessions in total; 0 means no limit")
    join: Literal["stationary", "fresh"] = Field(
        "stationary", description="a joining user's first session: the rest of one in progress, or a whole one")
    hits: HitWeights = Field(DEFAULT_HIT_WEIGHTS, description="weights of the 7 hit bins; None (natural): no target")
    cache_outputs: bool = Field(True, description="the server caches generated tokens (decode-side radix cache)")
    vocab: int = Field(DEFAULT_VOCAB, ge=2)
    rate: float | None = Field(None, gt=0, description="requests per second when the client gets no --rate")

    @property
    def initial_length(self) -> LengthDist:
        return self.initial or LengthDist.model_validate(max(1, self.context // 4))


class AgenticSession:
    """One conversation. Not thread-safe; a client drives each session from one place."""

    def __init__(self, workload: AgenticWorkload, session_id: str, rng: random.Random, turns: int) -> None:
        self.session_id = session_id
        self._workload = workload
        self._config = workload.config
        # The targets draw from a generator of their own: how many fresh ids a turn draws depends on
        # the output received, and the targets should not.
        hits = self._config.hits
        self._targets = SessionHitTargets(hits, turns, random.Random(rng.getrandbits(64))) if hits else None
        self._rng = rng
        self._turns = turns
        self._turn = 0
        # The id sequences the server has seen from this session, less any that a later one extends
        # (_remember): at 64K tokens a turn, keeping all of them held gigabytes at the report's scale.
        self._cached: list[np.ndarray] = []
        # The last prompt planned and its ids as an array: the next turn grows from it, and turning a
        # 64K-token list into an array again costs more than the rest of planning a turn.
        self._last: tuple[list[int], np.ndarray] | None = None
        self.finished = False

    @property
    def turns(self) -> int:
        """The turns this session runs, unless a failed one ends it first."""
        return self._turns

    def first_request(self) -> RequestPlan:
        prompt = fresh_tokens(self._rng, self._config.initial_length.draw(self._rng), self._config.vocab)
        return self._plan(prompt, np.asarray(prompt, dtype=np.int64), target=None, think_s=0.0)

    def next_turn(self, previous_prompt: list[int], received_output_ids: list[int]) -> RequestPlan | None:
        if self.finished:
            return None
        conversation = [*previous_prompt, *received_output_ids]
        last = self._last
        prompt_ids = last[1] if last is not None and last[0] is previous_prompt \
            else np.asarray(previous_prompt, dtype=np.int64)
        conversation_ids = np.concatenate([prompt_ids, np.asarray(received_output_ids, dtype=np.int64)])
        if self._config.cache_outputs:
            self._remember(conversation_ids)
        self._turn += 1
        if self._turn >= self._turns:
            self.finished = True
            return None
        cached_len = len(conversation) if self._config.cache_outputs else len(previous_prompt)
        target = self._targets.draw() if self._targets else None
        keep, new = self._next_prompt(len(conversation), cached_len, target)
        fresh = fresh_tokens(self._rng, new, self._config.vocab)
        ids = np.concatenate([conversation_ids[:keep], np.asarray(fresh, dtype=np.int64)])
        think = self._rng.expovariate(1.0 / self._config.think) if self._config.think > 0 else 0.0
        return self._plan(conversation[:keep] + fresh, ids, target=target, think_s=think)

    def abandon(self) -> None:
        self.finished = True

    def _next_prompt(self, conversation_len: int, cached_len: int, target: float | None) -> tuple[int, int]:
        """(ids of the conversation kept, fresh ids added) for the next prompt."""
        context = self._config.context
        if target is None:
            new = min(context, self._config.tool.draw(self._rng))
            keep = min(conversation_len, context - new)
        else:
            total = math.ceil(cached_len / target) if target > 0 else math.inf
            if total <= context:
                keep = conversation_len
                new = max(1, int(total) - keep)
            else:
                keep = min(cached_len, math.floor(target * context))
                new = max(1, context - keep)
        return keep, new

    def _remember(self, ids: np.ndarray) -> None:
        """Keep `ids` for the hits of later turns, in place of the newest kept sequence if `ids` extends it.

        A later prompt shares no more with a prefix of `ids` than with `ids` itself, so dropping that
        prefix leaves every hit the same; what stays is one sequence per compaction of the history.
        """
        cached = self._cached
        if cached and len(cached[-1]) <= len(ids) and common_prefix_length(ids, cached[-1]) == len(cached[-1]):
            cached[-1] = ids
        else:
            cached.append(ids)

    def _plan(self, prompt: list[int], ids: np.ndarray, target: float | None, think_s: float) -> RequestPlan:
        reused = 0
        for seen in reversed(self._cached):  # the newest are the longest; one no longer than the best cannot beat it
            if len(seen) > reused:
                reused = max(reused, common_prefix_length(ids, seen))
        hit = reused / len(prompt)
        self._remember(ids)
        self._last = (prompt, ids)
        self._workload.record_hit(hit)
        return RequestPlan(
            request_id=f"{self.session_id}-t{self._turn}",
            prompt=prompt,
            max_tokens=self._config.output.draw(self._rng),
            session=self.session_id,
            turn=self._turn,
            hit_rate=hit,
            target_hit_rate=target,
            think_s=think_s,
            prompt_array=ids,
        )


class AgenticWorkload:
    """A source of agentic sessions, each following the hit-rate target on its own (SessionHitTargets)."""

    name = "agentic"
    own_timing = False
    arrival_shape = "poisson"
    arrival_cv = 1.0

    def __init__(self, config: AgenticConfig, rng: random.Random) -> None:
        self.config = config
        self.default_rate = config.rate
        self._rng = rng
        self._opened = 0
        self._hits: list[float] = []

    def new_session(self, joining: bool = False) -> AgenticSession | None:
        """The next session; `joining`: a user's first, which with `join=stationary` runs only the turns
        left of a session in progress at a random moment. Users that all opened whole sessions together
        would end them together, turn after turn, and the fresh first turns of their next sessions would
        come in waves, one a session's length apart (docs/loadgen.md, "Users joining")."""
        if self.config.sessions and self._opened >= self.config.sessions:
            return None
        session_id = f"s{self._opened}"
        self._opened += 1
        stationary = joining and self.config.join == "stationary"
        turns = self.config.turns.residual(self._rng) if stationary else self.config.turns.draw(self._rng)
        return AgenticSession(self, session_id, random.Random(self._rng.getrandbits(64)), turns)

    def record_hit(self, hit_rate: float) -> None:
        self._hits.append(hit_rate)

    def hit_distribution(self) -> HitDistribution:
        return HitDistribution.of(self._hits)
