"""The user's hooks: commands run before and after tools, after a verified task, at a run's end."""
