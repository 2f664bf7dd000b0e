"""Working memory: scored items in a hot zone under a token budget, a cold store behind."""
