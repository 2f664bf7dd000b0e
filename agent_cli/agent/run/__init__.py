"""One run: the session that drives it, its record and the store that keeps it."""
