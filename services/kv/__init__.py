"""The data plane: KV-cache payloads as real bytes in msgpack frames over TCP links."""
