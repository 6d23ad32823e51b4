"""The measurement file a GPU is calibrated from (format of shared/profiles/h200/*.json).

Microbenchmarks time single ops; `layer_*` rows time one decoder layer of the
shape in `layer`. Reading validates everything, so a bad file fails here with
the field that is wrong, not later inside the fit.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

_ROW = ConfigDict(frozen=True, extra="ignore")


class MeasurementError(ValueError):
    """A measurement file that cannot be read or does not have the expected shape."""


class HbmCopy(BaseModel):
    model_config = _ROW
    bytes_moved: int = Field(gt=0, description="bytes read plus bytes written")
    seconds: float = Field(gt=0)


class GemmRow(BaseModel):
    model_config = _ROW
    M: int = Field(gt=0)
    K: int = Field(gt=0)
    N: int = Field(gt=0)
    seconds: float = Field(gt=0)


class AttentionPrefillRow(BaseModel):
    model_config = _ROW
    S: int = Field(gt=0, description="causal sequence length, batch 1")
    heads: int = Field(gt=0)
    kv_heads: int = Field(gt=0)
    head_dim: int = Field(gt=0)
    seconds: float = Field(gt=0)


class AttentionDecodeRow(BaseModel):
    model_config = _ROW
    B: int = Field(gt=0, description="sequences, one query token each")
    C: int = Field(gt=0, description="cached tokens each attends over")
    seconds: float = Field(gt=0)


class LayerShape(BaseModel):
    """A Llama-style decoder layer (GQA, SwiGLU); its heads also describe the attention_decode rows."""

    model_config = _ROW
    name: str
    hidden: int = Field(gt=0)
    heads: int = Field(gt=0)
    kv_heads: int = Field(gt=0)
    head_dim: int = Field(gt=0)
    intermediate: int = Field(gt=0)


class PrefillRow(BaseModel):
    model_config = _ROW
    tokens: int = Field(gt=0)
    seconds: float = Field(gt=0)


class DecodeRow(BaseModel):
    model_config = _ROW
    batch: int = Field(gt=0)
    context: int = Field(gt=0)
    seconds: float = Field(gt=0, description="per layer; for the CUDA-graph rows, a replay of 8 layers / 8")


class ExtendRow(BaseModel):
    model_config = _ROW
    new_tokens: int = Field(gt=0)
    context: int = Field(gt=0, description="tokens already cached")
    seconds: float = Field(gt=0)


class Measurements(BaseModel):
    model_config = _ROW
    device: str
    dtype: str = Field(pattern="^bfloat16$", description="only bf16 measurements are understood")
    hbm_copy: HbmCopy
    gemm: list[GemmRow] = Field(min_length=3)
    attention_prefill: list[AttentionPrefillRow] = Field(min_length=2)
    attention_decode: list[AttentionDecodeRow] = Field(min_length=2)
    layer: LayerShape
    layer_prefill_eager: list[PrefillRow] = Field(min_length=1)
    layer_decode_eager: list[DecodeRow] = Field(min_length=1)
    layer_decode_cuda_graph: list[DecodeRow] = Field(min_length=1)
    layer_extend: list[ExtendRow] = Field(min_length=1)


GRAPH_LAYERS = 8  # layers per replayed graph in the CUDA-graph measurement


def read_measurements(path: str | Path) -> Measurements:
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise MeasurementError(f"cannot read measurement file {path}: {exc.strerror or exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise MeasurementError(f"measurement file {path} is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise MeasurementError(f"measurement file {path} must hold a JSON object, not {type(data).__name__}")
    try:
        return Measurements.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'file'}: {e['msg']}" for e in exc.errors()[:5])
        raise MeasurementError(f"measurement file {path} is not in the expected format: {problems}") from None
