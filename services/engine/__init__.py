"""The emulated inference engine shared by every role: step clock, batching, prefix cache, tokens."""
