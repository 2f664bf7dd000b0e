"""How a request forces the model to call one tool, learned per server for the run.

Three forms, tried in this order until one yields the call:

1. `tool_choice: "required"` with the one tool offered: OpenAI, vLLM, llama.cpp and others.
2. `tool_choice: {"type": "function", "function": {"name": ...}}`: the older OpenAI form, which
   some servers need and llama.cpp refuses ("Wrong type supplied for parameter 'tool_choice'").
3. `response_format: {"type": "json_schema", ...}` with the tool's parameters as the schema,
   the tools still offered with `tool_choice: "none"`: structured output, which llama.cpp,
   vLLM, Ollama and OpenAI constrain with a grammar. The tools stay in the request because a
   chat template renders them into the prompt: without them the prompt would differ from the
   first token and the server's prompt cache would be lost (a server that refuses "none"
   gets the schema without the tools). llama.cpp's "required" lets a model write free text before the call, which a small
   model fills until the reply runs out; a schema leaves it nothing but the arguments. The
   reply's content is then read as the arguments of the forced tool (content_calls.py).

A form is switched when the server refuses it (a 400 naming it) or answers without the call,
until one has worked; then it is kept for the run. A form that worked on a local server in
an earlier run is tried first (server/findings.py), the others still after it.

A request that must call one of several tools (`tool_choice: "required"` with more than one
offered; the executor sends it after a reply without a call) is sent as "required", or, once
the run has learned the schema form, as a json_schema `response_format` whose schema is any
one of the tools as `{"name": ..., "arguments": ...}`. It is not used to learn the form.
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

    def __init__(self, first: str = FORMS[0]) -> None:
        self.form = first if first in FORMS else FORMS[0]  # a form that worked before goes first
        self.known = False
        self._tried = {self.form}
        self._tools_with_schema = True  # until a server refuses tool_choice "none"

    def shape(
        self,
        kwargs: dict[str, Any],
        tools: list[dict[str, Any]],
        tool_choice: Any,
        forced: str | None,
        any_tool: bool,
    ) -> bool:
        """Put the tools and the forcing on a request; True when it asks for structured output.

        Neither forcing one tool nor any: the tools with `tool_choice` as given, a "required"
        among several tools that the server refused (any_tool cleared) becoming "auto"."""
        if forced or any_tool:
            self.apply(kwargs, tools, forced)
            return self.form == "schema"
        kwargs["tools"] = tools
        kwargs["tool_choice"] = "auto" if tool_choice == "required" else tool_choice or "auto"
        return False

    def apply(self, kwargs: dict[str, Any], tools: list[dict[str, Any]], name: str | None) -> None:
        """Set what forces tool `name` (any of `tools` when None) on the request `kwargs`."""
        if self.form == "schema":
            kwargs.pop("tools", None)
            kwargs.pop("tool_choice", None)
            if self._tools_with_schema:
                kwargs["tools"], kwargs["tool_choice"] = tools, "none"
            kwargs["response_format"] = schema_format(tools, name)
            return
        kwargs["tools"] = tools
        kwargs["tool_choice"] = (
            "required"
            if self.form == "required" or name is None
            else {"type": "function", "function": {"name": name}}
        )

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
        if self.form == "schema" and self._tools_with_schema and "tool_choice" in low:
            self._tools_with_schema = False  # "none" refused: the schema alone
            return True
        named = (
            "response_format" in low or "json_schema" in low
            if self.form == "schema"
            else ("tool_choice" in low)
        )
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


def schema_format(tools: list[dict[str, Any]], name: str | None) -> dict[str, Any]:
    """`response_format` asking for the arguments of tool `name` as one JSON object, or, when
    `name` is None, for a call of any one of `tools` as {"name": ..., "arguments": ...}."""
    fns = [t["function"] for t in tools if isinstance(t.get("function"), dict)]
    if name is not None:
        fn = next(f for f in fns if f.get("name") == name)
        schema = fn.get("parameters") or {"type": "object"}
        return {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}
    calls = [
        {
            "type": "object",
            "properties": {
                "name": {"const": f["name"]},
                "arguments": f.get("parameters") or {"type": "object"},
            },
            "required": ["name", "arguments"],
        }
        for f in fns
    ]
    return {"type": "json_schema", "json_schema": {"name": "tool_call", "schema": {"anyOf": calls}}}
