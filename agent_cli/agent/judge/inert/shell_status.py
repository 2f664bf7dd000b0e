"""The exit statuses a shell script can end with, read from its text without running it.

The acceptance gate asks whether a `sh -c` script can fail at all. The script is parsed the
way a POSIX shell reads it (lists, `&&`/`||`, pipelines, `!`, subshells `( ... )`, groups
`{ ...; }`, `if`, `while`/`until`, `for`, `case`, functions) and run on an abstract machine
whose statuses are 0 and "not 0": every simple command's possible statuses come from a
judge the caller gives (`true` can only succeed, `pytest` can do either); the shell's own
builtins are followed here: `exit N` (its number modulo 256; `exit $VAR` when the script set
VAR to a number; `exit` alone repeats the last status), `set -e` and `set -o pipefail`,
`trap ACTION EXIT` (the action runs when the script ends, and an `exit` in it gives the
script's status), `wait` with no job (status 0), `exec`, `return` in a function. A pipeline's
status is its last command's unless pipefail is on; a command run with `&` leaves 0; a loop
or an `if` whose branches are not taken leaves 0; a `while` or `until` that may go on for
ever fails (the check's time limit stops it); under `set -e` a failing command outside a
condition ends the script; a file read with `<` can be missing.

Whatever cannot be read that way (`eval`, `.`, `break`, a here-document, bash's `[[`, a
script too branchy to follow) makes the answer None: nothing is known, so the caller allows
the script. The answer errs the same way everywhere else: it holds every status the script
can end with, and maybe more.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from agent_cli.agent.judge.inert.shell_parse import (
    AndOr,
    Command,
    Compound,
    Pipeline,
    Seq,
    Simple,
    Unknown,
    Word,
    parse,
)

# (argv, stdin) -> the statuses the command can end with, a subset of {0, 1} (1: any failure);
# stdin is "empty" (/dev/null), "pipe" (a pipeline's earlier stage), "text" (a here-string)
# or "file" (a file it is given with `<`)
Judge = Callable[[list[str], str], frozenset[int]]
BOTH = frozenset({0, 1})
_LIMIT_WORLDS = 256  # more distinct states than this: the script is not followed
_LIMIT_STEPS = 20_000
_LIMIT_LOOP = 12  # passes of a loop's body before its states must repeat
_LIMIT_DEPTH = 8  # functions calling functions, traps, subshells within subshells
_EXIT_TRAPS = {"EXIT", "0"}


@dataclass(frozen=True)
class _World:
    """One state the script can be in: its last status (0, or 1 for any failure), whether it
    has ended ("exit", "exec", "return" from a function, "hang": it never ends), its options,
    its EXIT trap, the variables it set (None: unknown) and the functions it defined."""

    status: int = 0
    ended: str = ""
    errexit: bool = False
    pipefail: bool = False
    trap: str | None = None
    env: tuple[tuple[str, str | None], ...] = ()
    funcs: tuple[tuple[str, int], ...] = ()

    def but(self, **changes: Any) -> _World:
        return replace(self, **changes)

    def set_var(self, name: str, value: str | None) -> _World:
        env = dict(self.env)
        env[name] = value
        return self.but(env=tuple(sorted(env.items())))


@dataclass(frozen=True)
class _Ctx:
    ignore: bool = False  # errexit is ignored here: a condition, the left of && or ||
    stdin: str = "empty"
    depth: int = 0  # nesting: function calls, subshells, traps
    in_function: bool = False
    trap_status: int | None = None  # the status a trap's action started with


Worlds = frozenset[_World]


class _Machine:
    def __init__(self, judge: Judge) -> None:
        self.judge = judge
        self.functions: list[Command] = []
        self.steps = 0

    def tick(self, worlds: Iterable[_World]) -> frozenset[_World]:
        found = frozenset(worlds)
        self.steps += 1
        if len(found) > _LIMIT_WORLDS or self.steps > _LIMIT_STEPS:
            raise Unknown("too many ways through the script")
        return found

    def seq(self, node: Seq, worlds: Worlds, ctx: _Ctx) -> Worlds:
        for and_or, background in node.items:
            ended = {w for w in worlds if w.ended}
            live = frozenset(worlds - ended)
            if background:  # it runs on its own: the shell goes on with status 0
                after = {w.but(status=0) for w in live}
            else:
                after = set(self.and_or(and_or, live, ctx))
            worlds = self.tick(ended | after)
        return worlds

    def and_or(self, node: AndOr, worlds: Worlds, ctx: _Ctx) -> Worlds:
        chain = [("", node.first), *node.rest]
        current: set[_World] = set(worlds)
        for at, (joiner, pipeline) in enumerate(chain):
            last = at == len(chain) - 1
            runs = {
                w
                for w in current
                if not w.ended and (not joiner or (w.status == 0) == (joiner == "&&"))
            }
            here = ctx if last else replace(ctx, ignore=True)
            current = (current - runs) | set(self.pipeline(pipeline, frozenset(runs), here))
        return self.tick(current)

    def pipeline(self, node: Pipeline, worlds: Worlds, ctx: _Ctx) -> Worlds:
        out: set[_World] = set()
        inner = replace(ctx, ignore=True) if node.negated else ctx
        for world in worlds:
            if len(node.stages) == 1:
                results = set(self.command(node.stages[0], frozenset({world}), inner))
            else:
                each = [
                    self.subshell(
                        stage, world, replace(inner, stdin=ctx.stdin if k == 0 else "pipe")
                    )
                    for k, stage in enumerate(node.stages)
                ]
                if not all(each):
                    statuses: set[int] = set()  # a stage never ends, nor does the pipeline
                elif world.pipefail:
                    statuses = {1} if any(1 in s for s in each) else set()
                    statuses |= {0} if all(0 in s for s in each) else set()
                else:
                    statuses = set(each[-1])
                results = {world.but(status=s) for s in statuses}
            if node.negated:
                results = {w if w.ended else w.but(status=1 - w.status) for w in results}
            elif not ctx.ignore:  # set -e: a failure here ends the script
                results = {
                    w.but(ended="exit") if not w.ended and w.status and w.errexit else w
                    for w in results
                }
            out |= results
        return self.tick(out)

    def subshell(self, node: Command, world: _World, ctx: _Ctx) -> frozenset[int]:
        """The statuses `node` ends with, run in a subshell of `world` (a stage, `( ... )`)."""
        if ctx.depth > _LIMIT_DEPTH:
            raise Unknown("too deep")
        start = world.but(trap=None, ended="")  # a subshell starts without the EXIT trap
        inner = replace(ctx, depth=ctx.depth + 1, in_function=False)
        return self.final(self.command(node, frozenset({start}), inner), inner)

    def final(self, worlds: Iterable[_World], ctx: _Ctx) -> frozenset[int]:
        """The statuses a script (or subshell) in these states ends with, its EXIT trap run."""
        out: set[int] = set()
        for world in worlds:
            if world.ended in ("exec", "hang") or world.trap is None:
                out.add(world.status)
                continue
            action = parse(world.trap)
            start = world.but(trap=None, ended="")
            inner = replace(ctx, depth=ctx.depth + 1, trap_status=world.status, ignore=False)
            if inner.depth > _LIMIT_DEPTH:
                raise Unknown("too deep")
            for after in self.seq(action, frozenset({start}), inner):
                out.add(after.status if after.ended == "exit" else world.status)
        return frozenset(out)

    def command(self, node: Command, worlds: Worlds, ctx: _Ctx) -> Worlds:
        if isinstance(node, Simple):
            return self.tick(w for world in worlds for w in self.simple(node, world, ctx))
        stdin, may_fail = _input(node.redirects, ctx.stdin)
        here = replace(ctx, stdin=stdin)
        out = self.compound(node, worlds, here)
        if may_fail:  # the file it reads may be missing
            out = out | {w.but(status=1) for w in worlds}
        return self.tick(out)

    def compound(self, node: Compound, worlds: Worlds, ctx: _Ctx) -> Worlds:
        kind, parts = node.kind, node.parts
        if kind == "subshell":
            return self.tick(
                world.but(status=s)
                for world in worlds
                for s in self.subshell(Compound("group", parts), world, ctx)
            )
        if kind == "group":
            return self.seq(parts[0], worlds, ctx)
        if kind == "if":
            return self.if_clause(parts, worlds, ctx)
        if kind in ("while", "until", "for"):
            return self.loop(node, worlds, ctx)
        if kind == "case":  # no arm matched (status 0), or any one of them
            out = {w.but(status=0) for w in worlds}
            for arm in parts:
                out |= self.seq(arm, worlds, ctx)
            return self.tick(out)
        assert kind == "function" and node.body is not None
        self.functions.append(node.body)
        index = len(self.functions) - 1
        return self.tick(
            w.but(funcs=tuple(sorted({**dict(w.funcs), node.name: index}.items())), status=0)
            for w in worlds
        )

    def if_clause(self, parts: list[Seq], worlds: Worlds, ctx: _Ctx) -> Worlds:
        out: set[_World] = set()
        pending: set[_World] = set(worlds)
        for at in range(0, len(parts) - 1, 2):
            after = self.seq(parts[at], frozenset(pending), replace(ctx, ignore=True))
            out |= {w for w in after if w.ended}
            taken = frozenset(w for w in after if not w.ended and w.status == 0)
            pending = {w for w in after if not w.ended and w.status != 0}
            out |= self.seq(parts[at + 1], taken, ctx)
        if len(parts) % 2:
            out |= self.seq(parts[-1], frozenset(pending), ctx)
        else:  # no branch taken: status 0
            out |= {w.but(status=0) for w in pending}
        return self.tick(out)

    def loop(self, node: Compound, worlds: Worlds, ctx: _Ctx) -> Worlds:
        """A loop's states once it is left: by its condition (`for`: after any number of
        passes), with the last pass's status, or 0 when the body never ran. A `while` or
        `until` whose condition can keep it going may never end: it then fails, stopped by
        the check's time limit (`until pytest; do sleep 1; done` is a check)."""
        cond = node.parts[0] if node.kind != "for" else None
        body = node.parts[-1]
        out: set[_World] = set()
        frontier = {(w, 0) for w in worlds}
        seen = set(frontier)
        for _ in range(_LIMIT_LOOP):
            following: set[tuple[_World, int]] = set()
            for world, last in frontier:
                if cond is None:
                    stay = {world.set_var(node.name, None)}
                    out.add(world.but(status=last))
                else:
                    stay = set()
                    for w in self.seq(cond, frozenset({world}), replace(ctx, ignore=True)):
                        if w.ended:
                            out.add(w)
                        elif (w.status == 0) == (node.kind == "while"):
                            stay.add(w)
                        else:
                            out.add(w.but(status=last))
                for w in self.seq(body, frozenset(stay), ctx):
                    if w.ended:
                        out.add(w)
                    else:
                        following.add((w, w.status))
                        if cond is not None:
                            out.add(w.but(status=1, ended="hang"))
            frontier = following - seen
            seen |= following
            if not frontier:
                return self.tick(out)
        raise Unknown("a loop whose states do not settle")

    def simple(self, node: Simple, world: _World, ctx: _Ctx) -> set[_World]:
        stdin, may_fail = _input(node.redirects, ctx.stdin)
        env = dict(world.env)
        if not node.words:  # assignments alone: status 0, or a substitution's
            for var, word in node.assigns:
                world = world.set_var(var, word.value(env, world.status) if word else None)
                env = dict(world.env)
            substitutes = any(word is None or word.substitutes() for _, word in node.assigns)
            statuses = BOTH if substitutes or may_fail else frozenset({0})
            return {world.but(status=s) for s in statuses}
        values = [word.value(env, world.status) for word in node.words]
        while values[:1] in (["command"], ["builtin"]) and len(values) > 1:
            if (values[1] or "-").startswith("-"):
                break
            values, node = values[1:], Simple(node.assigns, node.words[1:], node.redirects)
        name = values[0]
        if name is None:
            return {world.but(status=s) for s in BOTH}
        args = values[1:]
        if name in ("eval", ".", "source", "break", "continue", "alias"):
            raise Unknown(f"{name} is not followed")
        if name in ("exit", "return"):
            if name == "return" and not ctx.in_function:
                raise Unknown("return outside a function")
            if not args:  # the last status, or in a trap the one it started with
                statuses = frozenset({world.status if ctx.trap_status is None else ctx.trap_status})
            else:
                statuses = _exit_statuses(args[0])
            return {world.but(status=s, ended=name) for s in statuses}
        if name == "set":
            return {_set(world, args)}
        if name == "trap":
            return {_trap(world, args)}
        if name == "wait":  # with no job: 0 once every background job is done
            return {world.but(status=s) for s in ({0} if not args else BOTH)}
        shown = [v if v is not None else w.raw for v, w in zip(values, node.words, strict=True)]
        if name == "exec":
            rest = _exec_command(shown[1:])
            if not rest:
                return {world.but(status=0)}
            return {world.but(status=s, ended="exec") for s in self.judge(rest, stdin)}
        functions = dict(world.funcs)
        if name in functions:
            return self.call(self.functions[functions[name]], world, ctx)
        statuses = self.judge(shown, stdin)
        if may_fail:
            statuses = BOTH
        return {world.but(status=s) for s in statuses}

    def call(self, body: Command, world: _World, ctx: _Ctx) -> set[_World]:
        if ctx.depth > _LIMIT_DEPTH:
            raise Unknown("functions nested too deep")
        inner = replace(ctx, depth=ctx.depth + 1, in_function=True)
        out = set()
        for w in self.command(body, frozenset({world}), inner):
            out.add(w.but(ended="") if w.ended == "return" else w)
        return out


def _input(redirects: list[tuple[str, Word]], stdin: str) -> tuple[str, bool]:
    """What a command reads after its redirections, and whether one may fail: a file it
    reads can be missing, a descriptor other than 0, 1, 2 may not be open. Writing into a
    file is taken to succeed (only a tree made to refuse it would fail it)."""
    may_fail = False
    for op, target in redirects:
        value = target.value({}, None)
        if op in ("<", "<>"):
            if value == "/dev/null":
                stdin = "empty"
            else:
                stdin, may_fail = "file", True
        elif op == "<<<":
            stdin = "text"
        elif op in ("<&", ">&") and value not in ("0", "1", "2", "-"):
            stdin, may_fail = ("file" if op == "<&" else stdin), True
    return stdin, may_fail


def _exit_statuses(word: str | None) -> frozenset[int]:
    """The statuses `exit WORD` gives: its number modulo 256 (0 or 1 here), or 2 for what is
    not a number (the shell refuses it); both when the word is only known when run."""
    if word is None:
        return BOTH
    text = word.strip()
    if re.fullmatch(r"[+-]?\d+", text):
        return frozenset({0 if int(text) % 256 == 0 else 1})
    return frozenset({1})


def _set(world: _World, args: list[str | None]) -> _World:
    if any(arg is None for arg in args):
        raise Unknown("set with a value only known when run")
    words = [str(arg) for arg in args]
    at = 0
    while at < len(words):
        word = words[at]
        if word == "--" or word[:1] not in ("-", "+"):
            break
        on = word[0] == "-"
        letters = word[1:]
        if "o" in letters and at + 1 < len(words):
            option = words[at + 1]
            if option == "errexit":
                world = world.but(errexit=on)
            elif option == "pipefail":
                world = world.but(pipefail=on)
            at += 1
        if "e" in letters:
            world = world.but(errexit=on)
        at += 1
    return world.but(status=0)


def _trap(world: _World, args: list[str | None]) -> _World:
    words = list(args)
    if words[:1] == ["--"]:
        words = words[1:]
    if not words or words[0] in ("-p", "-l", "-P"):
        return world.but(status=0)
    action, conditions = words[0], words[1:]
    if action is not None and action.isdigit():  # `trap 0 ...`: conditions to reset
        action, conditions = "-", words
    if not any(str(c).upper() in _EXIT_TRAPS for c in conditions if c is not None):
        if any(c is None for c in conditions):
            raise Unknown("a trap on conditions only known when run")
        return world.but(status=0)
    if action is None:
        raise Unknown("a trap whose action is only known when run")
    return world.but(trap=None if action in ("-", "") else action, status=0)


def _exec_command(words: list[str]) -> list[str]:
    """The command `exec` runs, past its own options (`-c`, `-l`, `-a NAME`)."""
    at = 0
    while at < len(words) and words[at].startswith("-"):
        if words[at] == "--":
            return words[at + 1 :]
        at += 2 if words[at] == "-a" else 1
    return words[at:]


def statuses(
    script: str,
    judge: Judge,
    *,
    errexit: bool = False,
    pipefail: bool = False,
    stdin: str = "empty",
) -> frozenset[int] | None:
    """The statuses (0, and 1 for any failure) `script` can end with, when the shell is
    started with `-e` (`errexit`) or `-o pipefail` and reads `stdin`; None when the script
    holds what is not followed here (nothing is known then)."""
    try:
        tree = parse(script)
        machine = _Machine(judge)
        ctx = _Ctx(stdin=stdin)
        start = frozenset({_World(errexit=errexit, pipefail=pipefail)})
        return machine.final(machine.seq(tree, start, ctx), ctx)
    except (Unknown, RecursionError):
        return None
