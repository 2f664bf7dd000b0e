"""Tools from MCP servers: configuration, connections, and the provider the tool registry asks."""
