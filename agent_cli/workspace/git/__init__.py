"""The repository through git: discovery, status, branches, commits, safe git environment."""
