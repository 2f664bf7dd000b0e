"""The command layer: typer commands, the one wiring module (the only reader of Settings), doctor."""
