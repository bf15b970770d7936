"""DESIGN.md's boundaries, enforced by reading every module's imports."""

from __future__ import annotations

import ast
import gc
import sys
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "dsv4tui"
AGENT_BUNDLED = {"httpx", "httpcore", "h11", "anyio", "sniffio", "idna", "certifi", "pynvml",
                 "prometheus_client"}
STDLIB = set(sys.stdlib_module_names)


def parse(path: Path) -> ast.Module:
    # CPython 3.11 raised "AST constructor recursion depth mismatch" here once, in CI, when
    # a collection ran a finalizer in the middle of ast.parse: parse with the GC off
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return ast.parse(path.read_text(encoding="utf-8"))
    finally:
        if was_enabled:
            gc.enable()


def imports(path: Path) -> set[str]:
    tree = parse(path)
    package = ".".join(path.relative_to(PKG.parent).with_suffix("").parts[:-1])
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolved against the module's own package
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
            elif node.module:
                module = node.module
            else:
                continue
            names.add(module)
            names |= {f"{module}.{a.name}" for a in node.names}
    return names


# The three parts (README "Layout"): the agent (host side, and the simulated host beside it),
# the core (no Textual) and the two faces over it, the CLI and the Textual UI. Imports go
# downward only: a face imports the core, the core imports the agent, and neither face
# imports the other (only the entry point, dsv4tui/main.py, knows both).
TOOLKIT = ("textual", "textual_plotext", "plotext", "textual_serve")


def _own(names: set[str]) -> set[str]:
    return {n for n in names if n.split(".")[0] == "dsv4tui"}


def _imports_of(part: str) -> dict[str, set[str]]:
    return {str(path.relative_to(PKG)): imports(path) for path in modules(part)}


def modules(sub: str) -> list[Path]:
    base = PKG / sub
    return sorted(base.rglob("*.py")) if base.is_dir() else [base]


def test_agent_imports_only_stdlib_and_bundled() -> None:
    bad = []
    for path in modules("agent"):
        for name in imports(path):
            top = name.split(".")[0]
            if top == "dsv4tui":
                if not (name.startswith("dsv4tui.agent") or name in ("dsv4tui", "dsv4tui.__version__")):
                    bad.append(f"{path.name}: {name}")
            elif top not in STDLIB and top not in AGENT_BUNDLED:
                bad.append(f"{path.name}: {name}")
    assert not bad, f"agent imports outside stdlib + bundle: {bad}"


def test_the_tree_has_three_parts() -> None:
    top = sorted(p.name for p in PKG.iterdir() if p.name != "__pycache__")
    assert top == ["__init__.py", "__main__.py", "agent", "cli", "core", "main.py", "sim", "tui"]


# The simulator's argparse takes the same flag choices as the launch validator: the one module
# of the core the simulated host reads (pure data, no imports of its own).
SIM_READS = ("dsv4tui.core.server.sglang_choices", "dsv4tui.core.server")


def test_sim_imports_only_itself_and_the_agent() -> None:
    bad = [f"{where}: {name}" for where, names in _imports_of("sim").items()
           for name in _own(names)
           if not name.startswith(("dsv4tui.sim", "dsv4tui.agent"))
           and name not in ("dsv4tui", "dsv4tui.__version__", *SIM_READS)]
    assert not bad, f"the simulated host reaches above itself: {bad}"


def test_core_imports_no_face_and_no_toolkit() -> None:
    bad = []
    core = _imports_of("core")
    assert "core/telemetry.py" in core and "core/view/model.py" in core
    for where, names in core.items():
        for name in names:
            if name.split(".")[0] in TOOLKIT or name.startswith(
                    ("dsv4tui.cli", "dsv4tui.tui", "dsv4tui.main")):
                bad.append(f"{where}: {name}")
    assert not bad, f"core modules import a face or the UI toolkit: {bad}"


def test_cli_never_imports_the_tui() -> None:
    bad = [f"{where}: {name}" for where, names in _imports_of("cli").items() for name in names
           if name.split(".")[0] in TOOLKIT or name.startswith(("dsv4tui.tui", "dsv4tui.main"))]
    assert not bad, f"CLI commands import the Textual face: {bad}"


def test_tui_never_imports_the_cli() -> None:
    bad = [f"{where}: {name}" for where, names in _imports_of("tui").items() for name in names
           if name.startswith(("dsv4tui.cli", "dsv4tui.main"))]
    assert not bad, f"the Textual face imports CLI commands: {bad}"


def test_ui_never_opens_connections() -> None:
    forbidden = {"asyncssh", "socket", "sqlite3", "httpx", "subprocess"}
    forbidden_own = ("dsv4tui.core.hosts.ssh", "dsv4tui.core.store")
    bad = []
    for sub in ("tui/screens", "tui/widgets", "tui/themes", "tui/responsive.py", "tui/keymap.py"):
        for path in modules(sub):
            for name in imports(path):
                if name.split(".")[0] in forbidden or name.startswith(forbidden_own):
                    bad.append(f"{path.relative_to(PKG)}: {name}")
    assert not bad, f"UI modules reach the network/files directly: {bad}"


# -- import loops ------------------------------------------------------------------------------
# Every import of a dsv4tui module by another, also those inside functions (a function-level
# import that closes a loop is still a loop: the two modules cannot be read, tested or moved
# one without the other), except those under ``if TYPE_CHECKING:`` (they never run).

def _module_names() -> dict[str, Path]:
    """dotted name -> file, for every module of the package (a package: its __init__)."""
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        parts = path.relative_to(PKG.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _runtime_imports(node: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """The import statements under ``node`` that can run (``if TYPE_CHECKING:`` bodies out;
    their ``else:`` in)."""
    found: list[ast.Import | ast.ImportFrom] = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            found.append(child)
        elif isinstance(child, ast.If) and _is_type_checking(child.test):
            for stmt in child.orelse:
                found += _runtime_imports(ast.Module(body=[stmt], type_ignores=[]))
        else:
            found += _runtime_imports(child)
    return found


def import_graph() -> dict[str, set[str]]:
    """module -> the dsv4tui modules it imports. ``import a.b.c`` and ``from a.b.c import x``
    are edges to a.b.c (the nearest module of the name); ``from pkg import name`` is an edge
    to pkg.name where that is a module, else to pkg."""
    mods = _module_names()

    def nearest(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = parse(path)
        edges: set[str | None] = set()
        for node in _runtime_imports(tree):
            if isinstance(node, ast.Import):
                edges |= {nearest(a.name) for a in node.names}
                continue
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            for a in node.names:
                full = f"{module}.{a.name}"
                edges.add(full if full in mods else nearest(module))
        graph[name] = {e for e in edges if e is not None and e != name}
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def test_no_import_loops() -> None:
    graph = import_graph()
    assert "dsv4tui.agent.server" in graph and "dsv4tui.core.store" in graph
    cycles = import_cycles(graph)
    assert not cycles, "import loops (each a set of modules that import each other):\n" + \
        "\n".join(" <-> ".join(c) for c in cycles)


def test_the_loop_finder_sees_loops_through_functions_and_not_type_checking() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert import_cycles(graph) == [["a", "b", "c"]]
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import x\n"
                     "else:\n    import y\ndef f():\n    import z\n")
    names = [a.name for n in _runtime_imports(tree) if isinstance(n, ast.Import)
             for a in n.names]
    assert names == ["y", "z"]


# The run store's modules use one another's public names only, and nothing outside
# runstore.py reaches into a RunStore (its connection, lock, transaction or query plumbing):
# the public query()/transaction() and the store's methods are the way in.
STORE = PKG / "core" / "store"


def _private_store_names() -> set[str]:
    tree = parse(STORE / "runstore.py")
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "RunStore")
    names = {f.name for f in cls.body if isinstance(f, ast.FunctionDef)}
    names |= {n.attr for n in ast.walk(cls) if isinstance(n, ast.Attribute)
              and isinstance(n.value, ast.Name) and n.value.id == "self"}
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def test_the_store_is_used_through_public_names_only() -> None:
    private = _private_store_names()
    assert {"_tx", "_query", "_db", "_lock"} <= private
    store_modules = {p.stem for p in STORE.glob("*.py")} - {"__init__"}
    bad = []
    for path in sorted(PKG.rglob("*.py")):
        where = str(path.relative_to(PKG))
        tree = parse(path)
        modules_here: set[str] = set()  # names bound to a module (protocol._lock: not ours)
        store_here: set[str] = set()  # ... to one of the store's modules
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules_here |= {(a.asname or a.name).split(".")[0] for a in node.names}
                store_here |= {a.asname for a in node.names if a.asname
                               and a.name.startswith("dsv4tui.core.store.")}
            elif isinstance(node, ast.ImportFrom):
                module = node.module or ""
                modules_here |= {a.asname or a.name for a in node.names}
                if module == "dsv4tui.core.store":
                    store_here |= {a.asname or a.name for a in node.names
                                   if a.name in store_modules}
                if module.startswith("dsv4tui.core.store"):
                    bad += [f"{where}: from {module} import {a.name}" for a in node.names
                            if a.name.startswith("_")]
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute) or not node.attr.startswith("_") \
                    or node.attr.startswith("__"):
                continue
            owner = node.value.id if isinstance(node.value, ast.Name) else None
            if owner in store_here:
                bad.append(f"{where}:{node.lineno}: {owner}.{node.attr}")
            elif node.attr in private and path != STORE / "runstore.py" \
                    and owner not in ("self", "cls") and owner not in modules_here:
                bad.append(f"{where}:{node.lineno}: .{node.attr}")
    assert not bad, f"private run store names used from outside: {bad}"


# No module reaches into another dsv4tui module's private names (``bench._Sink``,
# ``protocol._lock``, ``session._event``): what another module needs is public, named so.
def _own_modules() -> dict[str, Path]:
    out = {}
    for path in PKG.rglob("*.py"):
        parts = path.relative_to(PKG.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def test_no_module_uses_another_modules_private_names() -> None:
    mods = _own_modules()
    bad = []
    for name, path in sorted(mods.items()):
        where = str(path.relative_to(PKG))
        tree = parse(path)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        bound: dict[str, str] = {}  # local name -> the dsv4tui module it is bound to
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                bound |= {a.asname: a.name for a in node.names if a.asname and a.name in mods}
            elif isinstance(node, ast.ImportFrom):
                module = node.module or ""
                if node.level:
                    base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                    module = f"{base}.{module}" if module else base
                for a in node.names:
                    if module in mods and a.name.startswith("_") and not a.name.startswith("__"):
                        bad.append(f"{where}:{node.lineno}: from {module} import {a.name}")
                    elif f"{module}.{a.name}" in mods:
                        bound[a.asname or a.name] = f"{module}.{a.name}"
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") \
                    and not node.attr.startswith("__") and isinstance(node.value, ast.Name) \
                    and bound.get(node.value.id, name) != name:
                bad.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
    assert not bad, f"private names of other modules used: {bad}"


def test_the_private_name_check_sees_a_violation(tmp_path: Path) -> None:
    tree = ast.parse("from dsv4tui.agent import bench\nbench._Sink()\n")
    attrs = [n for n in ast.walk(tree) if isinstance(n, ast.Attribute)]
    assert [ast.unparse(a) for a in attrs if a.attr.startswith("_")] == ["bench._Sink"]
    assert "dsv4tui.agent.bench" in _own_modules()


def test_one_reading_of_a_process_start_time() -> None:
    """A process's start time (what tells a live process from a reused pid) is read by
    dsv4tui.agent.procs.proc_start only: the agent, the console and the tests' helpers ask
    it, none parses /proc/PID/stat for it on its own."""
    root = PKG.parent
    own = PKG / "agent" / "procs.py"
    bad = []
    for path in sorted([*PKG.rglob("*.py"), *(root / "tests").rglob("*.py"),
                        *(root / "benchmarks").rglob("*.py")]):
        if path == own:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        bad += [f"{path.relative_to(root)}:{n.lineno}: def {n.name}" for n in ast.walk(tree)
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                and n.name.lstrip("_") == "proc_start"]
    assert not bad, f"a second reader of a process's start time: {bad}"


def test_agent_bundle_runs_hello(tmp_path: Path) -> None:
    """The zipapp built from the installed package runs on a bare python with -I (no site)."""
    import json
    import subprocess

    from dsv4tui.core.hosts.deploy import build_bundle

    bundle = build_bundle()
    out = subprocess.run([sys.executable, "-I", "-S", str(bundle.path), "hello"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.splitlines()[0])["type"] == "hello"
    # the bundle carries its own httpx and pynvml: importable with site-packages off
    probe = subprocess.run([sys.executable, "-I", "-S", "-c",
                            "import sys; sys.path.insert(0, sys.argv[1]); import httpx, pynvml; "
                            "import prometheus_client.parser as p; print(httpx.__file__); "
                            "print(p.__file__)", str(bundle.path)],
                           capture_output=True, text=True, timeout=60)
    assert probe.returncode == 0, probe.stderr
    assert all(line.startswith(str(bundle.path)) for line in probe.stdout.splitlines())
