"""DESIGN.md's boundaries, enforced by reading every module's imports."""

from __future__ import annotations

import ast
import gc
import sys
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "dsv4tui"
AGENT_BUNDLED = {"httpx", "httpcore", "h11", "anyio", "sniffio", "idna", "certifi", "pynvml"}
STDLIB = set(sys.stdlib_module_names)


def imports(path: Path) -> set[str]:
    # CPython 3.11 raised "AST constructor recursion depth mismatch" here once, in CI, when
    # a collection ran a finalizer in the middle of ast.parse: parse with the GC off
    gc.disable()
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    finally:
        gc.enable()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names |= {f"{node.module}.{a.name}" for a in node.names}
    return names


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


def test_core_never_imports_textual() -> None:
    bad = []
    for sub in ("hosts", "store", "sim", "config.py", "agent", "telemetry.py", "launch.py"):
        for path in modules(sub):
            if not path.exists():
                continue
            for name in imports(path):
                if name.split(".")[0] in ("textual", "textual_plotext", "plotext"):
                    bad.append(f"{path.relative_to(PKG)}: {name}")
    assert not bad, f"core modules import the UI toolkit: {bad}"


def test_ui_never_opens_connections() -> None:
    forbidden = {"asyncssh", "socket", "sqlite3", "httpx", "subprocess"}
    bad = []
    for sub in ("screens", "widgets"):
        for path in modules(sub):
            for name in imports(path):
                if name.split(".")[0] in forbidden:
                    bad.append(f"{path.relative_to(PKG)}: {name}")
    assert not bad, f"UI modules reach the network/files directly: {bad}"


def test_agent_bundle_runs_hello(tmp_path: Path) -> None:
    """The zipapp built from the installed package runs on a bare python with -I (no site)."""
    import json
    import subprocess

    from dsv4tui.hosts.deploy import build_bundle

    bundle = build_bundle()
    out = subprocess.run([sys.executable, "-I", "-S", str(bundle.path), "hello"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.splitlines()[0])["type"] == "hello"
    # the bundle carries its own httpx and pynvml: importable with site-packages off
    probe = subprocess.run([sys.executable, "-I", "-S", "-c",
                            "import sys; sys.path.insert(0, sys.argv[1]); import httpx, pynvml; "
                            "print(httpx.__file__)", str(bundle.path)],
                           capture_output=True, text=True, timeout=60)
    assert probe.returncode == 0, probe.stderr
    assert str(bundle.path) in probe.stdout
