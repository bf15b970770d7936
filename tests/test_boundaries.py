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


def imports(path: Path) -> set[str]:
    # CPython 3.11 raised "AST constructor recursion depth mismatch" here once, in CI, when
    # a collection ran a finalizer in the middle of ast.parse: parse with the GC off
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    finally:
        if was_enabled:
            gc.enable()
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


# The UI: Textual screens and widgets, the App and what it is built from, the key bindings.
UI = ("screens", "widgets", "themes", "app.py", "app_campaign.py", "app_fleet.py", "responsive.py",
      "keymap.py")


def core_modules() -> list[Path]:
    """Everything that is not the UI (derived, so a new module is checked without a list)."""
    ui = [PKG / part for part in UI]
    return [path for path in sorted(PKG.rglob("*.py"))
            if not any(path == u or u in path.parents for u in ui)]


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
    core = core_modules()
    assert PKG / "telemetry.py" in core and PKG / "commands" / "gpus.py" in core
    for path in core:
        for name in imports(path):
            if name.split(".")[0] in ("textual", "textual_plotext", "plotext"):
                bad.append(f"{path.relative_to(PKG)}: {name}")
    assert not bad, f"core modules import the UI toolkit: {bad}"


def test_ui_never_opens_connections() -> None:
    forbidden = {"asyncssh", "socket", "sqlite3", "httpx", "subprocess"}
    forbidden_own = ("dsv4tui.hosts.ssh", "dsv4tui.store")
    bad = []
    for sub in ("screens", "widgets", "themes", "responsive.py", "keymap.py"):
        for path in modules(sub):
            for name in imports(path):
                if name.split(".")[0] in forbidden or name.startswith(forbidden_own):
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
                            "import prometheus_client.parser as p; print(httpx.__file__); "
                            "print(p.__file__)", str(bundle.path)],
                           capture_output=True, text=True, timeout=60)
    assert probe.returncode == 0, probe.stderr
    assert all(line.startswith(str(bundle.path)) for line in probe.stdout.splitlines())
