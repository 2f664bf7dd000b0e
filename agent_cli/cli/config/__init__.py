"""Settings (~/.agentrc < <repo>/.agentrc < environment < flags) and repository trust."""
