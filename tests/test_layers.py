"""The package's shape, checked over `ast`: layers, vendor SDKs one module each, no import cycle.

Every import counts, the lazy ones inside functions included. Also: no module over 400
lines and no function over 50 lines in `agent_cli/`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "agent_cli"
COMMAND_LAYER = {"agent_cli.cli", "agent_cli.cli_run", "agent_cli.cli_memory", "agent_cli.doctor",
                 "agent_cli.wiring", "agent_cli.__main__", "agent_cli.cli_help"}
# Each vendor SDK, and the only modules allowed to import it.
VENDORS = {
    "openai": {"agent_cli.llm.openai_model"},
    "chromadb": {"agent_cli.memory.longterm"},
    "git": {"agent_cli.workspace.git"},
    "tiktoken": {"agent_cli.tokens"},
    "wordllama": {"agent_cli.memory.embed"},
    "rich": {"agent_cli.console", "agent_cli.render"},
    "typer": {"agent_cli.cli", "agent_cli.cli_run", "agent_cli.cli_memory", "agent_cli.cli_trust",
              "agent_cli.cli_help"},
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports_of(name: str) -> set[str]:
    """Every module `name` imports, anywhere in its code; `from pkg import mod` names pkg.mod."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1]
                                + ([node.module] if node.module else []))
            subs = {f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in MODULES}
            found |= subs or {base}
    return found


GRAPH = {name: imports_of(name) for name in MODULES}


def ours(names: set[str]) -> set[str]:
    return {n for n in names if n in MODULES}


def top(names: set[str]) -> set[str]:
    return {n.split(".")[0] for n in names}


def in_layer(prefix: str) -> list[str]:
    return [m for m in MODULES if m == prefix or m.startswith(prefix + ".")]


def test_the_check_sees_lazy_imports():
    assert "agent_cli.llm.openai_model" in GRAPH["agent_cli.wiring"]  # imported inside a function
    assert "chromadb" in GRAPH["agent_cli.memory.longterm"]


@pytest.mark.parametrize("name", in_layer("agent_cli.agent"))
def test_the_agent_layer_sees_neither_the_command_layer_nor_the_terminal_nor_a_vendor(name):
    imported = GRAPH[name]
    assert not imported & (COMMAND_LAYER | {"agent_cli.console", "agent_cli.render"}), name
    assert not top(imported) & set(VENDORS), name


@pytest.mark.parametrize("name", in_layer("agent_cli.memory") + in_layer("agent_cli.workspace")
                         + in_layer("agent_cli.llm"))
def test_memory_workspace_and_llm_never_import_the_agent_or_the_command_layer(name):
    bad = {m for m in GRAPH[name] if m.startswith("agent_cli.agent") or m in COMMAND_LAYER}
    assert not bad, f"{name} imports {bad}"


@pytest.mark.parametrize("name", in_layer("agent_cli.memory") + in_layer("agent_cli.workspace")
                         + in_layer("agent_cli.llm"))
def test_memory_workspace_and_llm_never_import_each_other(name):
    layer = name.split(".")[1]
    others = {f"agent_cli.{other}" for other in ("memory", "workspace", "llm") if other != layer}
    bad = {m for m in GRAPH[name] if any(m == o or m.startswith(o + ".") for o in others)}
    assert not bad, f"{name} imports {bad}"


@pytest.mark.parametrize("vendor", sorted(VENDORS))
def test_each_vendor_sdk_is_imported_only_where_it_belongs(vendor):
    users = {name for name, imported in GRAPH.items() if vendor in top(imported)}
    assert users <= VENDORS[vendor], f"{vendor} imported by {sorted(users - VENDORS[vendor])}"


def test_there_is_no_import_cycle_lazy_imports_included():
    cycles = []
    state: dict[str, int] = {}  # 1 on the path, 2 finished

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(ours(GRAPH[node])):
            if state.get(nxt) == 1:
                cycles.append(path[path.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = 2

    for name in sorted(MODULES):
        if name not in state:
            visit(name, [name])
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_no_module_over_400_lines_and_no_function_over_50():
    long_modules = {name: n for name, path in MODULES.items()
                    if (n := len(path.read_text().splitlines())) > 400}
    long_functions = []
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > 50:
                    long_functions.append(f"{name}.{node.name} ({length} lines)")
    assert not long_modules, long_modules
    assert not long_functions, long_functions
