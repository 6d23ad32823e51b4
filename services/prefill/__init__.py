"""The prefill role: computes prompts with its prefix cache and ships the KV the receiver lacks."""
