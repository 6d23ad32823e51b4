"""The control plane's generated gRPC code, one channel per peer.

The stubs are generated from proto/pdd/v1/control.proto when this module is
imported (grpcio-tools' `protos_and_services`), so the .proto file is the only
source of truth and nothing generated is committed.
"""

from __future__ import annotations

import sys
from importlib import resources

import grpc

_PROTO_ROOT = str(resources.files("proto"))
if _PROTO_ROOT not in sys.path:
    sys.path.insert(0, _PROTO_ROOT)

pb, pb_grpc = grpc.protos_and_services("pdd/v1/control.proto")

REQUEST_ID_METADATA = "x-request-id"
# Names the caller's token feed (Decode.Tokens) that a Generate call sends its tokens through.
TOKEN_FEED_METADATA = "x-pdd-token-feed"
# KV announces and token streams are small; these bound what a peer may send us.
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.keepalive_time_ms", 10_000),
]


def channel(address: str) -> grpc.aio.Channel:
    """One long-lived channel per peer, created at start-up and closed at shutdown."""
    return grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS)


def server() -> grpc.aio.Server:
    return grpc.aio.server(options=CHANNEL_OPTIONS)


def metadata(request_id: str, token_feed: str = "") -> tuple[tuple[str, str], ...]:
    if token_feed:
        return (REQUEST_ID_METADATA, request_id), (TOKEN_FEED_METADATA, token_feed)
    return ((REQUEST_ID_METADATA, request_id),)


def metadata_value(context: grpc.aio.ServicerContext, key: str) -> str:
    """The value of one invocation-metadata key of a call, "" when absent."""
    for item in context.invocation_metadata() or ():
        if item.key == key:
            return item.value
    return ""
