"""Text the model writes back with a secret's mask in it: restored from the file, or refused.

What the model reads is redacted (`core.redact`): a configured secret, or a key shape, in a
file it reads becomes `[REDACTED]`. A model that rewrites that file from what it was shown
sends the mask back, and writing it would put the mask where the user's text was: the secret,
or an ordinary word that is also a configured secret's value (a server's `env` holding
`POSTGRES_PASSWORD = "postgres"` masks every `postgres`). So each line of a write's content,
or of an edit's `old` and `new`, that holds the mask is taken back to the file's own line
when it is that line as the model was shown it (the redaction of exactly one of the file's
lines: two lines that differ but read the same once masked are no answer). A line holding the
mask that is none of them (a masked line the model changed, part of one, the mask typed anew)
refuses the call, and nothing is written: the model is told to keep such lines as shown, or to
edit around the masked part. A file's own `[REDACTED]` text, unmasked, is a line like any.
"""

from __future__ import annotations

from agent_cli.core.errors import ToolError
from agent_cli.core.redact import MASK, redact


def unmasked(text: str, original: str, secrets: tuple[str, ...], what: str) -> str:
    """`text` with each line that holds the mask as the line of `original` it was shown as;
    ToolError naming `what` (`content`, `old`, `new`) and the first line none is."""
    if MASK not in text:
        return text
    shown: dict[str, str | None] = {}  # a masked line -> the file's line (None: two differ)
    for line in original.split("\n"):
        line = line.rstrip("\r")  # as read_file shows it: without the CRs that end it
        masked = redact(line, secrets)
        if MASK in masked:
            shown[masked] = line if shown.get(masked, line) == line else None
    out = []
    for number, line in enumerate(text.split("\n"), 1):
        end = line[len(line.rstrip("\r")) :]
        if MASK in line:
            real = shown.get(line.rstrip("\r"))
            if real is None:
                raise ToolError(
                    f"line {number} of {what} holds {MASK}, which stands for a secret masked in "
                    "what you were shown, and is not one of the file's lines as you were shown "
                    "it: writing it would put the mask in place of the real text. Keep lines "
                    f"holding {MASK} exactly as shown, or change the text around them with "
                    f"edit_file, leaving the masked part out of old and new"
                )
            line = real + end
        out.append(line)
    return "\n".join(out)
