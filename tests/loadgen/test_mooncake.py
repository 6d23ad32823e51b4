import json
import random
from pathlib import Path

import pytest

from loadgen.spec import parse_spec
from loadgen.tokens import block_tokens, expand_hash_ids
from loadgen.workloads import MooncakeWorkload

SAMPLE = Path(__file__).resolve().parents[2] / "loadgen" / "samples" / "mooncake-sample.jsonl"


def write_trace(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_hash_ids_expand_to_the_same_tokens_every_time():
    assert block_tokens(42, 512) == block_tokens(42, 512)
    assert len(block_tokens(42, 512)) == 512
    assert block_tokens(42, 512) != block_tokens(43, 512)
    assert block_tokens(42, 512, seed=1) != block_tokens(42, 512)
    assert all(0 <= t < 1000 for t in block_tokens(7, 512, vocab=1000))


def test_shared_leading_ids_share_exactly_that_prefix():
    a = expand_hash_ids([1, 2, 3], 1400, 512)
    b = expand_hash_ids([1, 2, 9], 1300, 512)
    assert len(a) == 1400 and len(b) == 1300
    assert a[:1024] == b[:1024]
    assert a[1024] != b[1024]
    assert a[1024:] == list(block_tokens(3, 512))[:376]  # the last block is cut to the input length


def test_too_few_blocks_is_an_error():
    with pytest.raises(ValueError, match="cannot hold"):
        expand_hash_ids([1], 600, 512)


def test_replay_plans_times_lengths_and_hits(tmp_path):
    trace = write_trace(tmp_path / "t.jsonl", [
        {"timestamp": 1000, "input_length": 1024, "output_length": 30, "hash_ids": [0, 1]},
        {"timestamp": 3000, "input_length": 1200, "output_length": 900, "hash_ids": [0, 1, 2]},
        {"timestamp": 5000, "input_length": 500, "output_length": 5, "hash_ids": [7]},
    ])
    source = MooncakeWorkload(parse_spec(f"mooncake:{trace}:speed=2,max_output=100"), random.Random(0))
    plans = []
    while (session := source.new_session()) is not None:
        plan = session.first_request()
        assert session.next_turn(plan.prompt, [1, 2]) is None  # trace requests stand alone
        plans.append(plan)
    assert [p.at_s for p in plans] == [0.0, 1.0, 2.0]
    assert [p.max_tokens for p in plans] == [30, 100, 5]
    assert [p.prompt_tokens for p in plans] == [1024, 1200, 500]
    # request 2 reuses both blocks of request 1: 1024 of its 1200 tokens
    assert [p.hit_rate for p in plans] == [0.0, pytest.approx(1024 / 1200), 0.0]
    assert plans[1].prompt[:1024] == plans[0].prompt


def test_limit_and_skip_select_requests():
    source = MooncakeWorkload(parse_spec(f"mooncake:{SAMPLE}:skip=10,limit=5"), random.Random(0))
    ids = []
    while (session := source.new_session()) is not None:
        ids.append(session.first_request().request_id)
    assert ids == ["r10", "r11", "r12", "r13", "r14"]


def test_missing_trace_file_is_reported():
    with pytest.raises(ValueError, match="does not exist"):
        MooncakeWorkload(parse_spec("mooncake:/no/such/trace.jsonl"))


def test_malformed_line_names_its_number(tmp_path):
    trace = tmp_path / "bad.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [0]}\n{"timestamp": 1}\n')
    source = MooncakeWorkload(parse_spec(f"mooncake:{trace}"))
    source.new_session()
    with pytest.raises(ValueError, match="bad.jsonl:2"):
        source.new_session()
