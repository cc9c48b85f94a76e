"""What serves the OpenAI-compatible API."""
