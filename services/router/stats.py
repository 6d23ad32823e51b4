"""The `pdd` object of a response (docs/mesh.md, "The `pdd` object"), as a typed model.

Pipelines fill one PddStats per request; `as_json()` gives the object the final
chunk or body carries. Field order is the JSON's key order; the fields that only
some pipelines set default to UNSET and are then left out, so each pipeline's
object has exactly the keys it had as a dict.
"""

from __future__ import annotations

import msgspec
from msgspec import UNSET, UnsetType


class HandoffStats(msgspec.Struct):
    """P-RLD-MD: how main decode took over (docs/pdd.md, "Handoff")."""

    mode: str  # "one-shot" | "catch-up"
    chunks: int
    stall_s: float  # main decode recomputing before its first token
    cut: int  # first output position main decode produced


class PolicyNote(msgspec.Struct):
    """PDD: the pipeline choice's estimate of the WAN transfer and why it chose as it did."""

    estimate_s: float | None
    reason: str


class PddStats(msgspec.Struct):
    mode: str
    pipeline: str
    prefill_hit_tokens: int = 0
    decode_hit_tokens: int = 0
    wan_bytes: int = 0  # emulated bytes
    kv_transfer_s: float = 0.0
    rld_tokens: int = 0
    md_tokens: int = 0
    handoff: HandoffStats | None = None
    singular: bool = False
    fallback: bool = False
    queued_s: float = 0.0
    degraded: str | None = None
    timeline: dict[str, float] = msgspec.field(default_factory=dict)
    decode_instance: str | UnsetType = UNSET
    relay_error: str | UnsetType = UNSET
    wan_transfer_cancelled: bool | UnsetType = UNSET
    policy: PolicyNote | UnsetType = UNSET
    degraded_cause: str | UnsetType = UNSET

    def as_json(self) -> dict:
        """The object as JSON-ready builtins; fields left UNSET are absent."""
        return msgspec.to_builtins(self)
