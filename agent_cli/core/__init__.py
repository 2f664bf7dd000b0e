"""What every layer shares: errors, events, models, protocols, tokens, text, fences, redaction."""
