"""The package's shape, checked over `ast`: layers, vendor SDKs one module each, no import cycle.

Every import counts, the lazy ones inside functions included. Also: a folder shows its ideas
(at most 10 entries at the top of `agent_cli/`, 12 in any package), no module over 800 lines,
and no class reads another object's private members.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "agent_cli"
# Each vendor SDK, and the only modules allowed to import it.
VENDORS = {
    "openai": {
        "agent_cli.llm.openai.chat",
        "agent_cli.llm.openai.client",
        "agent_cli.llm.openai.errors",
    },
    "chromadb": {"agent_cli.memory.longterm.chroma"},
    "git": {"agent_cli.workspace.git.handle"},
    "tiktoken": {"agent_cli.core.tokens"},
    "wordllama": {"agent_cli.memory.embed"},
    "rich": {
        "agent_cli.ui.console",
        "agent_cli.ui.render",
        "agent_cli.ui.batch_view",
        "agent_cli.ui.piped",
    },
    "typer": {
        "agent_cli.cli.app",
        "agent_cli.cli.commands.run_command",
        "agent_cli.cli.commands.runs_commands",
        "agent_cli.cli.commands.memory_commands",
        "agent_cli.cli.commands.trust_command",
        "agent_cli.cli.help",
        "agent_cli.cli.batch.command",
        "agent_cli.cli.commands.mcp_command",
    },
    "mcp": {"agent_cli.tools.mcp.connection"},
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
# Every module that typer or the wiring reaches: the command layer is the package `cli`.
COMMAND_LAYER = {m for m in MODULES if m.startswith("agent_cli.cli.") or m == "agent_cli.cli"}
COMMAND_LAYER.add("agent_cli.__main__")


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
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1]
                    + ([node.module] if node.module else [])
                )
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
    assert (
        "agent_cli.llm.openai.chat" in GRAPH["agent_cli.cli.wiring"]
    )  # imported inside a function
    assert "chromadb" in GRAPH["agent_cli.memory.longterm.chroma"]


@pytest.mark.parametrize("name", in_layer("agent_cli.agent"))
def test_the_agent_layer_sees_neither_the_command_layer_nor_the_terminal_nor_a_vendor(name):
    imported = GRAPH[name]
    assert not imported & (COMMAND_LAYER | {"agent_cli.ui.console", "agent_cli.ui.render"}), name
    assert not top(imported) & set(VENDORS), name


@pytest.mark.parametrize(
    "name",
    in_layer("agent_cli.memory") + in_layer("agent_cli.workspace") + in_layer("agent_cli.llm"),
)
def test_memory_workspace_and_llm_never_import_the_agent_or_the_command_layer(name):
    bad = {m for m in GRAPH[name] if m.startswith("agent_cli.agent") or m in COMMAND_LAYER}
    assert not bad, f"{name} imports {bad}"


@pytest.mark.parametrize(
    "name",
    in_layer("agent_cli.memory") + in_layer("agent_cli.workspace") + in_layer("agent_cli.llm"),
)
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
                cycles.append(path[path.index(nxt) :] + [nxt])
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = 2

    for name in sorted(MODULES):
        if name not in state:
            visit(name, [name])
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_ui_and_config_are_read_by_the_command_layer_only():
    """The session never reads settings, and nothing below the commands draws on the terminal."""
    readers = {
        name: {m for m in GRAPH[name] if m.startswith(("agent_cli.ui", "agent_cli.cli.config"))}
        for name in MODULES
        if not name.startswith(("agent_cli.cli", "agent_cli.ui"))
    }
    bad = {name: found for name, found in readers.items() if found}
    assert not bad, bad


@pytest.mark.parametrize("name", in_layer("agent_cli.tools"))
def test_outside_tools_see_only_the_workspace_and_core(name):
    allowed = ("agent_cli.tools", "agent_cli.workspace", "agent_cli.core")
    bad = {m for m in ours(GRAPH[name]) if not m.startswith(allowed)}
    assert not bad, f"{name} imports {bad}"


def test_core_imports_no_other_layer():
    bad = {
        name: {m for m in ours(GRAPH[name]) if not m.startswith("agent_cli.core")}
        for name in in_layer("agent_cli.core")
    }
    assert not {k: v for k, v in bad.items() if v}


def _entries(folder: Path) -> list[str]:
    return sorted(
        p.name
        for p in folder.iterdir()
        if p.name != "__pycache__" and (p.is_dir() or p.suffix == ".py")
    )


def test_a_folder_shows_its_ideas_at_a_glance():
    assert len(_entries(PACKAGE)) <= 10, _entries(PACKAGE)
    crowded = {
        str(d.relative_to(PACKAGE)): len(_entries(d))
        for d in PACKAGE.rglob("*")
        if d.is_dir() and (d / "__init__.py").exists() and len(_entries(d)) > 12
    }
    assert not crowded, crowded


def test_no_module_over_800_lines():
    long_modules = {
        name: n for name, path in MODULES.items() if (n := len(path.read_text().splitlines())) > 800
    }
    assert not long_modules, long_modules


def _is_stub(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    body = [
        b for b in fn.body if not (isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant))
    ]
    return all(isinstance(b, (ast.Pass, ast.Raise)) for b in body)


def _classes() -> dict[str, list[tuple[str, set[str], set[str], list[str]]]]:
    """Each class: where, the members it defines, the private members it reads, its bases."""
    found: dict[str, list[tuple[str, set[str], set[str], list[str]]]] = {}
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ClassDef):
                continue
            own: set[str] = set()
            reads: set[str] = set()
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and not _is_stub(item):
                    own.add(item.name)
                elif isinstance(item, ast.Assign):
                    own.update(t.id for t in item.targets if isinstance(t, ast.Name))
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    own.add(item.target.id)
            for sub in ast.walk(node):
                if (
                    isinstance(sub, ast.Attribute)
                    and isinstance(sub.value, ast.Name)
                    and sub.value.id == "self"
                ):
                    if isinstance(sub.ctx, ast.Store):
                        own.add(sub.attr)
                    elif sub.attr.startswith("_") and not sub.attr.startswith("__"):
                        reads.add(sub.attr)
            bases = [getattr(b, "id", getattr(b, "attr", "")) for b in node.bases]
            found.setdefault(node.name, []).append((name, own, reads, bases))
    return found


def test_no_class_reads_private_members_it_does_not_define_or_inherit():
    """Composition, not mixins: a class's private state is its own."""
    classes = _classes()

    def owned(cls: str, seen: tuple[str, ...] = ()) -> set[str]:
        out: set[str] = set()
        for _where, own, _reads, bases in classes.get(cls, []):
            out |= own
            for base in bases:
                if base not in seen:
                    out |= owned(base, (*seen, cls))
        return out

    foreign = [
        f"{where}.{cls}: {sorted(reads - owned(cls))}"
        for cls, defs in classes.items()
        for where, _own, reads, _bases in defs
        if reads - owned(cls)
    ]
    assert not foreign, foreign
