"""Commands: running them confined, their policy, parsing, and reaping their processes."""
