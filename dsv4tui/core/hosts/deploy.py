"""The agent bundle: a zipapp of dsv4tui.agent plus its pure-Python deps, named by hash.

Built from the installed package, uploaded once per version to ``~/.cache/dsv4tui/`` over SFTP
and run with the host's own python3 (>= 3.9); nothing is installed on the host.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import zipfile
from dataclasses import dataclass
from pathlib import Path

from dsv4tui.core import paths
from dsv4tui.core.errors import RemoteError
from dsv4tui.core.hosts.session import HostSession

# Pure-Python packages the agent needs (httpx for bench/health, pynvml for telemetry,
# prometheus_client's text parser for a server's /metrics).
BUNDLED = ("httpx", "httpcore", "h11", "anyio", "sniffio", "idna", "certifi", "pynvml",
           "exceptiongroup", "typing_extensions", "prometheus_client")
OPTIONAL = {"exceptiongroup", "sniffio"}  # only needed by older Pythons / older anyio
REMOTE_DIR = ".cache/dsv4tui"  # relative to the remote home (ssh and sftp start there)
MIN_PYTHON = (3, 9)

_MAIN = b"""import sys
if sys.version_info < (3, 9):
    sys.stdout.write('{"type":"error","v":1,"kind":"python","message":"dsv4tui agent needs '
                     'python >= 3.9, found %d.%d"}\\n' % sys.version_info[:2])
    sys.exit(7)
from dsv4tui.agent.__main__ import main
sys.exit(main())
"""
_ZIP_TIME = (2020, 1, 1, 0, 0, 0)


@dataclass(frozen=True)
class AgentBundle:
    path: Path
    digest: str

    @property
    def remote_path(self) -> str:
        return f"{REMOTE_DIR}/{self.path.name}"


def _package_files(name: str) -> list[tuple[str, Path]]:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        if name in OPTIONAL:
            return []
        raise RemoteError(f"cannot build the agent: python package {name!r} is not installed")
    origin = Path(spec.origin)
    if spec.submodule_search_locations is None:  # a single module such as pynvml.py
        return [(origin.name, origin)]
    root = origin.parent
    files = []
    for f in sorted(root.rglob("*")):
        if f.is_dir() or "__pycache__" in f.parts or f.suffix in (".pyc", ".so", ".pyd"):
            continue
        files.append((f"{name}/{f.relative_to(root).as_posix()}", f))
    return files


def _agent_files() -> list[tuple[str, Path]]:
    pkg = Path(__file__).resolve().parents[2]  # dsv4tui/
    files = [("dsv4tui/__init__.py", pkg / "__init__.py")]
    for f in sorted((pkg / "agent").rglob("*.py")):
        if "__pycache__" not in f.parts:
            files.append((f"dsv4tui/agent/{f.relative_to(pkg / 'agent').as_posix()}", f))
    for name in BUNDLED:
        files += _package_files(name)
    return files


def build_bundle() -> AgentBundle:
    """Build (or reuse) the zipapp; deterministic bytes, so the hash names the version."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as zf:
        info = zipfile.ZipInfo("__main__.py", _ZIP_TIME)
        info.compress_type = zipfile.ZIP_DEFLATED
        zf.writestr(info, _MAIN)
        for arcname, src in _agent_files():
            info = zipfile.ZipInfo(arcname, _ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, src.read_bytes())
    data = buf.getvalue()
    digest = hashlib.sha256(data).hexdigest()[:16]
    path = paths.agent_build_dir() / f"agent-{digest}.pyz"
    if not path.exists():
        tmp = path.with_suffix(".part")
        tmp.write_bytes(data)
        tmp.replace(path)
    return AgentBundle(path, digest)


async def check_python(session: HostSession, python: str) -> str:
    """The host's python version, or RemoteError naming what to set."""
    res = await session.run([python, "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
                            timeout=30)
    if res.exit_code == 127 or (res.exit_code != 0 and "not found" in res.stderr):
        raise RemoteError(f"{session.name}: {python!r} not found on the host; install python3 "
                          f"or set hosts.{session.name}.python in the config")
    if res.exit_code != 0:
        tail = (res.stderr.strip().splitlines() or [f"exit {res.exit_code}"])[-1]
        raise RemoteError(f"{session.name}: {python!r} failed to run: {tail}")
    version = res.stdout.strip()
    parts = tuple(int(p) for p in version.split(".")[:2])
    if parts < MIN_PYTHON:
        raise RemoteError(f"{session.name}: {python} is Python {version}; the agent needs "
                          f">= {MIN_PYTHON[0]}.{MIN_PYTHON[1]} (set hosts.{session.name}.python)")
    return version


async def ensure_uploaded(session: HostSession, bundle: AgentBundle) -> bool:
    """Upload the bundle unless the host already has this hash. True when it uploaded."""
    if await session.remote_exists(bundle.remote_path):
        return False
    await session.upload(bundle.path, bundle.remote_path)
    return True
