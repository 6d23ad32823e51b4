"""The router: OpenAI-compatible user API, pipeline choice, token streaming."""
