"""Packed token ids: what the router packs, every peer unpacks unchanged."""

from __future__ import annotations

import numpy as np
import pytest

from services.rpc import pb
from services.rpc.ids import MAX_ID, pack_ids, unpack_ids


@pytest.mark.parametrize("ids", [[0], [1, 2, 3], [MAX_ID, 0, 65535, 65536, 152063], list(range(70_000))])
def test_ids_survive_packing_and_a_protobuf_round_trip(ids):
    wire = pb.GenerateRequest(request_id="r", prompt_ids=pack_ids(ids)).SerializeToString()
    back = unpack_ids(pb.GenerateRequest.FromString(wire).prompt_ids)
    assert back.tolist() == ids and back.dtype == np.dtype("<u4")


def test_the_wire_format_is_uint32_little_endian():
    assert pack_ids([1, 256, MAX_ID]) == bytes([1, 0, 0, 0, 0, 1, 0, 0, 255, 255, 255, 255])
    assert pack_ids(np.array([7, 8], dtype=np.uint32)) == pack_ids([7, 8]) == pack_ids(np.array([7, 8]))


@pytest.mark.parametrize("ids", [[-1], [MAX_ID + 1], [1.0], ["1"]])
def test_ids_that_do_not_fit_uint32_are_refused(ids):
    with pytest.raises(ValueError, match="0..4294967295"):
        pack_ids(ids)


def test_a_buffer_that_is_not_whole_ids_is_refused():
    with pytest.raises(ValueError, match="multiple of 4"):
        unpack_ids(b"\x01\x00\x00")
    assert unpack_ids(b"").tolist() == []
