"""When a task fails or a result contradicts the plan: escalation and re-planning."""
