"""The OpenAI-compatible chat model and embedder: the only package that imports openai."""
