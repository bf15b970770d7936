"""``dsv4tui store backup FILE [--force]`` and ``dsv4tui store info``: the run store file itself.

A copy of ``runs.sqlite3`` alone is not a backup: in WAL mode the newest writes live in
``runs.sqlite3-wal`` until a checkpoint moves them into the main file. ``store backup`` uses
SQLite's online backup API, so the file it writes is one consistent snapshot with everything
committed, usable on its own, and can be taken while a sweep is writing.
"""

from __future__ import annotations

from typing import Any

from dsv4tui.cli.output import print_json
from dsv4tui.core import paths
from dsv4tui.core.store import RunStore, StoreError


def register(sub: Any) -> None:
    p = sub.add_parser("store")
    ssub = p.add_subparsers(dest="store_command", metavar="ACTION", required=True)
    q = ssub.add_parser("backup", help="write a consistent single-file copy of the run store "
                        "(safe while a sweep writes; a plain copy of runs.sqlite3 is not)")
    q.add_argument("file", metavar="FILE", help="where to write the copy")
    q.add_argument("--force", action="store_true", help="overwrite FILE if it exists")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=run_backup)
    q = ssub.add_parser("info", help="where the run store is, its size, schema and runs")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=run_info)


def _size(n: int | None) -> str:
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


def _open() -> RunStore:
    path = paths.store_file()
    if not path.exists():
        raise StoreError(f"no run store at {path} yet (nothing measured so far)")
    return RunStore(path)


def run_backup(args: Any) -> int:
    with _open() as store:
        done = store.backup(args.file, force=args.force)
    if args.json:
        print_json(done)
    else:
        runs = f"{done['runs']} run{'s' if done['runs'] != 1 else ''}"
        print(f"wrote {done['path']}: {runs}, {_size(done['bytes'])}, schema "
              f"{done['schema_version']} (one file, complete without a -wal)")
    return 0


def run_info(args: Any) -> int:
    with _open() as store:
        info = store.info()
    if args.json:
        print_json(info)
        return 0
    print(f"run store  {info['path']}")
    print(f"  size     {_size(info['bytes'])} (+ {_size(info['wal_bytes'])} in the -wal)")
    print(f"  schema   {info['schema_version']} (this dsv4tui: {info['schema_latest']})")
    print(f"  runs     {info['runs']} (last id {info['last_run_id'] or '-'})")
    if info["read_only"]:
        print(f"  read-only: {info['read_only_reason']}")
    return 0
