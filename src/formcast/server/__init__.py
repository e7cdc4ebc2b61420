"""OpenAI-compatible HTTP server over the formcast engine."""
