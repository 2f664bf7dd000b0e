"""What a run learns and reads: run memory, learning, the repository's instructions."""
