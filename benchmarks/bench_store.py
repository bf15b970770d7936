"""How much does writing every request row at once cost? (RunStore, WAL, synchronous=NORMAL)

1. Commits per request (what the runner does) against one transaction per 50 rows, with the
   event shape of a 256-token request (chunk gaps included). Prints rows/s and µs per row.
2. A sweep's writes while another process holds the write lock (``BEGIN EXCLUSIVE``) for
   ``--lock-s`` seconds (issue #12: 15 s): how many of its rows are stored, how long the
   longest write waited. A sweep stops at the first store error, as the runner does.

    python benchmarks/bench_store.py [--lock-s 15] [--rows 24] [--skip-throughput]
"""

from __future__ import annotations

import argparse
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dsv4tui.core.store import RunStore
from dsv4tui.core.store.runstore import _REQUEST_COLS, _dumps

N = 2000
HOLDER = ("import sqlite3, sys, time\n"
          "db = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
          "db.execute('BEGIN EXCLUSIVE')\n"
          "print('locked', flush=True)\n"
          "time.sleep(float(sys.argv[2]))\n"
          "db.execute('COMMIT')\n")


def event(i: int) -> dict:
    return {"level": 0, "index": i, "ok": True, "start_s": i * 0.01, "ttft_s": 0.1,
            "ttfat_s": 0.1, "e2e_s": 2.6, "tpot_s": 0.01, "output_tokens": 256,
            "prompt_tokens": 128, "token_source": "usage", "chunks": 256,
            "chunk_gaps_ms": [10.123] * 255, "finish_reason": "length", "status": 200}


def throughput(tmp: str) -> None:
    with RunStore(Path(tmp) / "a.db") as store:
        run = store.start_run(label="bench", host="h")
        t0 = time.perf_counter()
        for i in range(N):
            store.add_request(run, event(i))
        per = (time.perf_counter() - t0) / N
    print(f"commit per request : {1 / per:8.0f} rows/s  {per * 1e6:7.1f} us/row")
    with RunStore(Path(tmp) / "b.db") as store:
        run = store.start_run(label="bench", host="h")
        db: sqlite3.Connection
        t0 = time.perf_counter()
        for start in range(0, N, 50):
            with store.transaction() as db:
                for i in range(start, start + 50):
                    ev = event(i)
                    db.execute(
                        "INSERT INTO requests (run_id, level_idx, idx, chunk_gaps_json, "
                        f"{', '.join(_REQUEST_COLS)}) VALUES (?,?,?,?,"
                        f"{','.join('?' * len(_REQUEST_COLS))})",
                        (run, 0, i, _dumps(ev["chunk_gaps_ms"]),
                         *(ev.get(c) for c in _REQUEST_COLS)))
        per = (time.perf_counter() - t0) / N
    print(f"batches of 50      : {1 / per:8.0f} rows/s  {per * 1e6:7.1f} us/row")
    print("a sweep produces at most a few hundred rows/s, so commit-per-request is kept")


def locked_sweep(tmp: str, lock_s: float, rows: int, interval_s: float = 0.5) -> None:
    path = Path(tmp) / "locked.db"
    lock_at = rows // 3
    store = RunStore(path)
    run = store.start_run(label="locked", host="h")
    holder: subprocess.Popen[str] | None = None
    error, longest = None, 0.0
    try:
        for i in range(rows):
            if i == lock_at:
                holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(path), str(lock_s)],
                                          stdout=subprocess.PIPE, text=True)
                assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
            t0 = time.monotonic()
            try:
                store.add_request(run, event(i))
            except Exception as exc:  # the runner stops the sweep on a store error
                error = f"{type(exc).__name__}: {exc}"
                break
            longest = max(longest, time.monotonic() - t0)
            time.sleep(interval_s)
        else:
            store.finish_run(run, "done")
    finally:
        if holder is not None:
            holder.wait()
        store.close()
    db = sqlite3.connect(path)
    stored = db.execute("SELECT count(*) FROM requests").fetchone()[0]
    status = db.execute("SELECT status FROM runs").fetchone()[0]
    db.close()
    print(f"rows stored under a {lock_s:.0f} s lock: {stored}/{rows}  (longest write waited "
          f"{longest:.1f} s, run {status})")
    if error:
        print(f"  the sweep stopped: {error}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lock-s", type=float, default=15.0)
    ap.add_argument("--rows", type=int, default=24)
    ap.add_argument("--skip-throughput", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if not args.skip_throughput:
            throughput(tmp)
        if args.lock_s > 0:
            locked_sweep(tmp, args.lock_s, args.rows)


if __name__ == "__main__":
    main()
