"""Which notes state a rule of the whole repository: they apply to any task, whatever its words.

A note such as "Convention: tests here are table-driven" or "Pitfall: plain `pytest` fails in
this repository" holds for every task in the repository; the task that needs it names the
work ("write tests for dasherize"), not the rule, so no ranking against the goal finds it.
A note is taken for such a rule when its text says so, by either of:

- it opens by naming what it is: a convention, pitfall, rule, gotcha, caveat, warning, or
  "always"/"never"/"do not" (`Convention:`, `Pitfall -`, `Never run ...`);
- it speaks of the repository as a whole: "here", "this repository" (repo, project, codebase),
  "every ...", "all tests", "any ...".

Only notes count: facts say where code is and procedures are commands, both ranked by what
the goal names.
"""

from __future__ import annotations

import re

from agent_cli.core.protocols import Recalled

_OPENS = re.compile(
    r"^\W*(conventions?|pitfalls?|rules?|gotchas?|caveats?|warning|always|never|do not|don't)\b",
    re.IGNORECASE,
)
_WHOLE = re.compile(
    r"\b(here|this (repository|repo|project|codebase|package)|every|all tests|any)\b",
    re.IGNORECASE,
)


def is_rule(item: Recalled) -> bool:
    """Whether `item` is a note that states a rule of the whole repository."""
    if item.kind != "note":
        return False
    text = item.text
    return bool(_OPENS.match(text) or _WHOLE.search(text))
