"""One attempt at one task: the executor loop, its tools, loop guard and freshness."""
