"""One-shot requests to the model: request assembly, window fitting, prompts, planner, facts."""
