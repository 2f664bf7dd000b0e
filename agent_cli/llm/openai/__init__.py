"""The OpenAI-compatible model (the only openai import)."""
