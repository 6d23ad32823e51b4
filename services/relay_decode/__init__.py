"""The relay-decode role: decodes eagerly while the KV crosses the WAN, then hands over token ids."""
