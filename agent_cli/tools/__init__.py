"""Tools and hooks the run takes from outside the agent: MCP servers and user hooks."""
