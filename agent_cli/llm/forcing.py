"""How a request forces the model to call one tool, learned per server for the run.

Three forms, tried in this order until one yields the call:

1. `tool_choice: "required"` with the one tool offered: OpenAI, vLLM, llama.cpp and others.
2. `tool_choice: {"type": "function", "function": {"name": ...}}`: the older OpenAI form, which
   some servers need and llama.cpp refuses ("Wrong type supplied for parameter 'tool_choice'").
3. `response_format: {"type": "json_schema", ...}` with the tool's parameters as the schema
   and no tools: structured output, which llama.cpp, vLLM, Ollama and OpenAI constrain with a
   grammar. llama.cpp's "required" lets a model write free text before the call, which a small
   model fills until the reply runs out; a schema leaves it nothing but the arguments. The
   reply's content is then read as the arguments of the forced tool (content_calls.py).

A form is switched when the server refuses it (a 400 naming it) or answers without the call,
until one has worked; then it is kept for the run.
"""

from __future__ import annotations

from typing import Any

FORMS = ("required", "object", "schema")
DESCRIBED = {
    "required": 'tool_choice "required"',
    "object": 'tool_choice {"type": "function", "function": {"name": ...}}',
    "schema": "a json_schema response_format of the tool's parameters",
}


class Forcing:
    """The form in use, and whether it is known to work on this server."""

    def __init__(self) -> None:
        self.form = FORMS[0]
        self.known = False
        self._tried = {self.form}

    def apply(self, kwargs: dict[str, Any], tools: list[dict], name: str) -> None:
        """Set what forces tool `name` on the request `kwargs` in the current form."""
        if self.form == "schema":
            kwargs.pop("tools", None)
            kwargs.pop("tool_choice", None)
            kwargs["response_format"] = schema_format(tools, name)
            return
        kwargs["tools"] = tools
        kwargs["tool_choice"] = ("required" if self.form == "required"
                                 else {"type": "function", "function": {"name": name}})

    def answered(self, called: bool) -> bool:
        """Learn from a forced request's reply; True when the next form should be tried now."""
        if called:
            self.known = True
            return False
        return not self.known and self.next()

    def refused(self, detail: str) -> bool:
        """A 400 naming the form: True to send the request again, in the next form, or when
        every form has failed in the first one for good (its reply then stands as it is)."""
        low = detail.lower()
        named = "response_format" in low or "json_schema" in low if self.form == "schema" else (
            "tool_choice" in low)
        if not named or self.known:
            return False
        if not self.next():
            self.form, self.known = FORMS[0], True
        return True

    def next(self) -> bool:
        """Move to the next form not tried yet; False when none is left."""
        for form in FORMS:
            if form not in self._tried:
                self.form = form
                self._tried.add(form)
                return True
        return False


def schema_format(tools: list[dict], name: str) -> dict[str, Any]:
    """`response_format` asking for the arguments of tool `name` as one JSON object."""
    fn = next(t["function"] for t in tools if t.get("function", {}).get("name") == name)
    schema = fn.get("parameters") or {"type": "object"}
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}
