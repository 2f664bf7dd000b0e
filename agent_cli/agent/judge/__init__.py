"""Deciding whether a task is done: dispatch, the acceptance command, the model verdict."""
