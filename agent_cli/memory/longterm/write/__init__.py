"""How long-term memory is written when others write too: one writer at a time, and the outbox."""
