"""The command layer: typer commands, the wiring of a run (wiring.py) and what every command
shares (shared.py), the only readers of Settings with the commands, doctor."""
