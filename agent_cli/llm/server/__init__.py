"""What a server can do: its context window and forcing form, probed once."""
