"""The control plane's messages, generated from proto/pdd/v1/control.proto when this module is imported.

The role cores exchange these messages as data; this module gives them without the channels, stubs
and servers of services/rpc/__init__.py, which the cores must not import (pyproject.toml, "role-cores").
"""

from __future__ import annotations

import sys
from importlib import resources

import grpc

_PROTO_ROOT = str(resources.files("proto"))
if _PROTO_ROOT not in sys.path:
    sys.path.insert(0, _PROTO_ROOT)

PROTO = "pdd/v1/control.proto"
pb = grpc.protos(PROTO)
