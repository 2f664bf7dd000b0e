"""`agent batch FILE --jobs N`: many goals, each a worktree run of its own, N at a time."""
