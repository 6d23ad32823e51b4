"""The `pdd` object: its keys, their order and their JSON, against docs/mesh.md "The `pdd` object"."""

from __future__ import annotations

import json
import re
from pathlib import Path

from services.router.pipelines import Finished, base_stats
from services.router.stats import HandoffStats, PddStats, PolicyNote
from services.types import Mode, Pipeline

DOC = Path(__file__).parents[3] / "docs" / "mesh.md"
ALWAYS = 14  # the first keys of the documented table are in every object


def documented_keys() -> list[str]:
    section = DOC.read_text().split("## The `pdd` object", 1)[1].split("`timeline` stamps", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return [name for row in rows for name in re.findall(r"`([a-z_]+)`", row.split("|")[1])]


def test_the_model_has_the_documented_keys_in_the_documented_order():
    assert list(PddStats.__struct_fields__) == documented_keys()


def test_a_fresh_object_has_the_keys_every_pipeline_sends_and_no_more():
    assert list(base_stats(Mode.PDD, Pipeline.P_MD).as_json()) == documented_keys()[:ALWAYS]


def test_a_p_md_object_encodes_as_the_dict_it_replaced():
    stats = base_stats(Mode.PDD, Pipeline.P_MD)
    stats.prefill_hit_tokens, stats.decode_hit_tokens, stats.wan_bytes = 512, 256, 1_124_352
    stats.kv_transfer_s, stats.md_tokens, stats.queued_s = 0.0123, 16, 0.001
    stats.timeline = {"received": 1.5, "finished": 2.0}
    stats.decode_instance = "main-decode-1"
    stats.policy = PolicyNote(0.0118, "transfer below threshold")
    old = {"mode": "pdd", "pipeline": "P-MD", "prefill_hit_tokens": 512, "decode_hit_tokens": 256,
           "wan_bytes": 1124352, "kv_transfer_s": 0.0123, "rld_tokens": 0, "md_tokens": 16, "handoff": None,
           "singular": False, "fallback": False, "queued_s": 0.001, "degraded": None,
           "timeline": {"received": 1.5, "finished": 2.0}, "decode_instance": "main-decode-1",
           "policy": {"estimate_s": 0.0118, "reason": "transfer below threshold"}}
    assert json.dumps(Finished(stats).pdd) == json.dumps(old)


def test_a_handoff_and_a_relay_failure_keep_their_shapes():
    stats = base_stats(Mode.PDD, Pipeline.P_RLD_MD)
    stats.handoff = HandoffStats("catch-up", 3, 0.25, 40)
    stats.relay_error, stats.degraded = "deadline", "relay-transfer-deadline"
    body = Finished(stats).pdd
    assert body["handoff"] == {"mode": "catch-up", "chunks": 3, "stall_s": 0.25, "cut": 40}
    assert list(body)[ALWAYS:] == ["relay_error"] and "policy" not in body
