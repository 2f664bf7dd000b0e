"""The typer commands other than `doctor`: each module one command or group, registered by app."""
