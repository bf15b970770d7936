"""DESIGN.md's boundaries that pyproject.toml's import-linter contracts cannot state."""

from __future__ import annotations

import ast
import functools
import gc
import graphlib
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "dsv4tui"
AGENT_BUNDLED = {"httpx", "httpcore", "h11", "anyio", "sniffio", "idna", "certifi", "pynvml",
                 "prometheus_client"}
STDLIB = set(sys.stdlib_module_names)


@functools.cache  # three tests read every module: each is parsed once
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


def test_the_contracts_hold() -> None:
    """pyproject.toml's import-linter contracts (the layers, the agent alone, the simulator
    beside, no toolkit in the core, no connections from screens and widgets): also run by
    ``lint-imports`` in .ci/run."""
    cli = pytest.importorskip("importlinter.cli")  # the dev extra
    assert cli.lint_imports(config_filename=str(PKG.parent / "pyproject.toml"),
                            no_cache=True, no_logo=True) == 0


def test_agent_imports_only_stdlib_and_bundled() -> None:
    """What import-linter cannot say (it forbids names, it does not allow a list): the agent
    imports the standard library and the packages copied into its zipapp, nothing else."""
    graph = pytest.importorskip("grimp").build_graph(  # import-linter's graph (the dev extra)
        "dsv4tui", include_external_packages=True, cache_dir=None)
    outside = {m.split(".")[0] for m in graph.find_modules_directly_imported_by(
        "dsv4tui.agent", as_package=True)} - {"dsv4tui"}
    assert {"json", "httpx", "pynvml"} <= outside
    assert not outside - STDLIB - AGENT_BUNDLED, "agent imports outside stdlib + bundle"


def test_the_tree_has_three_parts() -> None:
    top = sorted(p.name for p in PKG.iterdir() if p.name != "__pycache__")
    assert top == ["__init__.py", "__main__.py", "agent", "cli", "core", "main.py", "sim", "tui"]


def test_no_import_loops() -> None:
    """No module imports itself through others, also through an import inside a function (two
    such modules cannot be read, tested or moved one without the other); imports under
    ``if TYPE_CHECKING:`` never run and do not count. (import-linter's acyclic_siblings
    contract is about packages, stricter than this.)"""
    graph = pytest.importorskip("grimp").build_graph(
        "dsv4tui", exclude_type_checking_imports=True, cache_dir=None)
    assert "dsv4tui.agent.host.server" in graph.modules and "dsv4tui.core.store" in graph.modules
    imported = {m: graph.find_modules_directly_imported_by(m) for m in graph.modules}
    try:
        graphlib.TopologicalSorter(imported).prepare()
    except graphlib.CycleError as loop:
        # graphlib lists the loop as "is imported by": say it as "imports"
        raise AssertionError("import loop: " + " -> ".join(reversed(loop.args[1]))) from None


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
    assert "dsv4tui.agent.bench.sweep" in _own_modules()


def test_one_reading_of_a_process_start_time() -> None:
    """A process's start time (what tells a live process from a reused pid) is read by
    dsv4tui.agent.host.procs.proc_start only: the agent, the console and the tests' helpers ask
    it, none parses /proc/PID/stat for it on its own."""
    root = PKG.parent
    own = PKG / "agent" / "host" / "procs.py"
    bad = []
    for path in sorted([*PKG.rglob("*.py"), *(root / "tests").rglob("*.py"),
                        *(root / "benchmarks").rglob("*.py")]):
        if path == own:
            continue
        tree = parse(path)
        bad += [f"{path.relative_to(root)}:{n.lineno}: def {n.name}" for n in ast.walk(tree)
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                and n.name.lstrip("_") == "proc_start"]
    assert not bad, f"a second reader of a process's start time: {bad}"


@pytest.mark.e2e
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
