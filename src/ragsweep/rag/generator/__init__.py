"""Generators: the OpenAI-compatible client and the model servers."""
