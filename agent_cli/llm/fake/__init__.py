"""The shipped loopback server that speaks the Chat Completions protocol, scripted."""
