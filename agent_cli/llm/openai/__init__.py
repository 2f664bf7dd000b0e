"""The OpenAI-compatible chat model and embedder: the only package that imports openai.

The SDK reads the `httpx` module, and chromadb imports it too, often on another thread while a
run's first requests go out. Two threads that each hold a module the other's import needs get
one of them half-initialised ("partially initialized module 'httpx' has no attribute 'URL'"),
so `httpx` is imported whole here, before anything of openai's, and before chromadb in
`memory/longterm/chroma.py`: whichever thread comes second waits for it, holding nothing.
"""

try:
    import httpx  # noqa: F401
except ImportError:  # not installed: the SDK then never reads it
    pass
