"""Whether Python code given with `python -c` exits 0 whatever the repository holds.

Code cannot fail when no statement of it can raise: constants and displays of them, names
bound before they are read (by the code itself or as builtins), `x = ...` to plain names,
`def` and `class` with nothing evaluated at definition (no decorator, default, annotation or
base; a function's body does not run until it is called), arithmetic on number literals of
one kind (`1 + 1`; `1 / 0` raises), comparisons that cannot raise (`==`, `is`; `<` between
numbers), `print` of such values, `pass`, an `if` of those, `assert` of a true constant,
imports of modules no file of the repository can shadow (built into the interpreter, or
`os`, loaded before the code runs), and an exit with status 0 (`sys.exit(0)`, `exit()`,
`os._exit(0)`, `raise SystemExit`), after which nothing runs. Anything else (a call, an
attribute, a subscript, an import the repository can shadow, a loop, `try`) can raise, or is
not judged here: the code is then allowed.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import sys

# modules a `python -c` finds before any file of the repository: built into the interpreter,
# or `os`, which the interpreter has loaded (frozen) before it runs the code
UNSHADOWED = {*sys.builtin_module_names, "os"}
# names a module's code can read before it binds any
_PRESET = {*dir(builtins), "__name__", "__doc__", "__builtins__", "__loader__", "__spec__"}
_PRESET.add("__package__")
_SAFE_COMPARE = (ast.Eq, ast.NotEq, ast.Is, ast.IsNot)
_NUMBER_OPS = (ast.Add, ast.Sub, ast.Mult)


def cannot_fail(code: str) -> bool:
    """Whether `code` (run by `python -c`) exits 0 whatever the repository holds."""
    try:
        compile(code, "<string>", "exec", dont_inherit=True)  # what compiling alone refuses
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return False  # it never runs: it fails every time, which the gate does not judge
    try:
        return _Reader().block(tree.body, set())
    except RecursionError:
        return False  # nested too deep to read: allowed


class _Reader:
    def block(self, body: list[ast.stmt], bound: set[str]) -> bool:
        """Whether the statements cannot raise; `bound`: the names the code has bound so far
        (grown as they run), which shadow the builtins of the same name."""
        for stmt in body:
            if self.exits_zero(stmt, bound):
                return True  # what follows never runs
            if not self.statement(stmt, bound):
                return False
        return True

    def statement(self, stmt: ast.stmt, bound: set[str]) -> bool:
        if isinstance(stmt, (ast.Pass, ast.Global)):
            return True
        if isinstance(stmt, ast.Expr):
            return self.expr(stmt.value, bound) or self.printed(stmt.value, bound)
        if isinstance(stmt, ast.Assign):
            if not all(isinstance(t, ast.Name) for t in stmt.targets):
                return False  # unpacking, an attribute or an item can raise
            if not self.expr(stmt.value, bound):
                return False
            bound.update(t.id for t in stmt.targets if isinstance(t, ast.Name))
            return True
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            return self.imports(stmt, bound)
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = stmt.args
            every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
            evaluated = (
                stmt.decorator_list
                or args.defaults
                or any(d is not None for d in args.kw_defaults)
                or stmt.returns
                or any(a is not None and a.annotation is not None for a in every)
                or getattr(stmt, "type_params", None)
            )
            bound.add(stmt.name)
            return not evaluated
        if isinstance(stmt, ast.ClassDef):
            plain = not (stmt.bases or stmt.keywords or stmt.decorator_list)
            if not plain or getattr(stmt, "type_params", None):
                return False
            if not self.block(stmt.body, set(bound)):
                return False
            bound.add(stmt.name)
            return True
        if isinstance(stmt, ast.If) and isinstance(stmt.test, ast.Constant):
            return self.block(stmt.body if stmt.test.value else stmt.orelse, set(bound))
        if isinstance(stmt, ast.If):  # what a branch binds is not counted after it
            return (
                self.expr(stmt.test, bound)
                and self.block(stmt.body, set(bound))
                and self.block(stmt.orelse, set(bound))
            )
        if isinstance(stmt, ast.Assert):
            return isinstance(stmt.test, ast.Constant) and bool(stmt.test.value)
        return False

    def imports(self, stmt: ast.Import | ast.ImportFrom, bound: set[str]) -> bool:
        if isinstance(stmt, ast.Import):
            if not all(alias.name in UNSHADOWED for alias in stmt.names):
                return False
            bound.update(alias.asname or alias.name for alias in stmt.names)
            return True
        if stmt.level or stmt.module not in UNSHADOWED:
            return False
        module = importlib.import_module(stmt.module)  # built in: importing it runs nothing
        if not all(alias.name != "*" and hasattr(module, alias.name) for alias in stmt.names):
            return False  # a name the module lacks raises ImportError
        bound.update(alias.asname or alias.name for alias in stmt.names)
        return True

    def name(self, node: ast.expr, bound: set[str]) -> bool:
        return isinstance(node, ast.Name) and (node.id in bound or node.id in _PRESET)

    def builtin(self, node: ast.expr, names: tuple[str, ...], bound: set[str]) -> bool:
        """Whether `node` is one of the builtins `names`, not rebound by the code."""
        return isinstance(node, ast.Name) and node.id in names and node.id not in bound

    def expr(self, node: ast.expr, bound: set[str]) -> bool:
        """Whether evaluating `node` cannot raise."""
        if isinstance(node, ast.Constant):
            return True
        if isinstance(node, ast.Name):
            return self.name(node, bound)
        if isinstance(node, (ast.Tuple, ast.List)):
            return all(self.expr(e, bound) for e in node.elts)  # a Starred is not an expr here
        if isinstance(node, ast.Set):  # an unhashable item raises: constants only
            return all(isinstance(e, ast.Constant) for e in node.elts)
        if isinstance(node, ast.Dict):
            keys_ok = all(isinstance(k, ast.Constant) for k in node.keys)
            return keys_ok and all(self.expr(v, bound) for v in node.values)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return self.expr(node.operand, bound)
        if isinstance(node, (ast.UnaryOp, ast.BinOp)):
            return _number(node) is not None
        if isinstance(node, ast.BoolOp):
            return all(self.expr(v, bound) for v in node.values)
        if isinstance(node, ast.IfExp):
            return all(self.expr(e, bound) for e in (node.test, node.body, node.orelse))
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if all(isinstance(op, _SAFE_COMPARE) for op in node.ops):
                return all(self.expr(e, bound) for e in operands)
            return all(_number(e) is not None for e in operands)  # `1 < 2`
        if isinstance(node, ast.Lambda):  # its body runs when it is called
            return not (node.args.defaults or any(node.args.kw_defaults))
        if isinstance(node, ast.NamedExpr):
            if not self.expr(node.value, bound):
                return False
            bound.add(node.target.id)
            return True
        return False

    def printed(self, node: ast.expr, bound: set[str]) -> bool:
        """`print(...)` of values that cannot raise, with no keyword (`file=` can)."""
        return (
            isinstance(node, ast.Call)
            and self.builtin(node.func, ("print",), bound)
            and not node.keywords
            and all(self.expr(arg, bound) for arg in node.args)
        )

    def exits_zero(self, stmt: ast.stmt, bound: set[str]) -> bool:
        """`sys.exit(0)`, `exit()`, `quit(None)`, `os._exit(0)`, `raise SystemExit`..."""
        if isinstance(stmt, ast.Raise):
            return stmt.cause is None and stmt.exc is not None and self.success(stmt.exc, bound)
        return isinstance(stmt, ast.Expr) and self.success(stmt.value, bound)

    def success(self, node: ast.expr, bound: set[str]) -> bool:
        if self.builtin(node, ("SystemExit",), bound):
            return True
        if not isinstance(node, ast.Call) or node.keywords or len(node.args) > 1:
            return False
        func = node.func
        named = self.builtin(func, ("exit", "quit", "SystemExit"), bound)
        dotted = (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and (func.value.id, func.attr) in (("sys", "exit"), ("os", "_exit"))
            and func.value.id in bound  # imported by the code
        )
        status = node.args[0] if node.args else None
        return (named or dotted) and (
            status is None or (isinstance(status, ast.Constant) and status.value in (0, None))
        )


def _number(node: ast.expr) -> type | None:
    """int or float when `node` is arithmetic on number literals of that one kind that cannot
    raise (+, -, *; `-x`, `~n` on an int); None otherwise (`1 / 0`, an int too large for a
    float)."""
    if isinstance(node, ast.Constant):
        value = node.value
        return int if isinstance(value, int) else float if isinstance(value, float) else None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd, ast.Invert)):
        kind = _number(node.operand)
        return None if kind is float and isinstance(node.op, ast.Invert) else kind
    if isinstance(node, ast.BinOp) and isinstance(node.op, _NUMBER_OPS):
        left, right = _number(node.left), _number(node.right)
        return left if left is not None and left is right else None
    return None
