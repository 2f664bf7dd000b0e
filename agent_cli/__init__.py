"""agent: a command-line coding agent that plans, executes, verifies and remembers."""

__version__ = "0.1.0"
