"""Token ids on the control plane: one little-endian uint32 buffer per prompt.

A 61K-id prompt as a protobuf `repeated int32` is built and parsed one varint at
a time on every hop (about 2 ms each way, per RPC); as `bytes` it is one copy,
and the receiver reads it as a numpy array without parsing anything. uint32
holds every vocabulary in services/profiles/models.yaml (the largest is 152,064).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

ID_DTYPE = np.dtype("<u4")
MAX_ID = 2**32 - 1


def pack_ids(ids: Sequence[int] | np.ndarray) -> bytes:
    """The ids as packed uint32 little-endian; ValueError for anything but integers in 0..MAX_ID."""
    array = np.asarray(ids)
    if array.size and (array.dtype.kind not in "iu" or array.min() < 0 or array.max() > MAX_ID):
        raise ValueError(f"token ids must be integers in 0..{MAX_ID} to be packed as uint32")
    return array.astype(ID_DTYPE, copy=False).tobytes()


def unpack_ids(data: bytes) -> np.ndarray:
    """The ids a packed buffer holds (read-only, no copy); ValueError if it is not whole uint32 values."""
    if len(data) % ID_DTYPE.itemsize:
        raise ValueError(f"packed token ids must be a multiple of {ID_DTYPE.itemsize} bytes, got {len(data)}")
    return np.frombuffer(data, dtype=ID_DTYPE)

