"""How much does writing every request row at once cost? (RunStore, WAL, synchronous=NORMAL)

Commits per request (what the runner does) against one transaction per 50 rows, with the
event shape of a 256-token request (chunk gaps included). Prints rows/s and µs per row.
"""

from __future__ import annotations

import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dsv4tui.store import RunStore
from dsv4tui.store.runstore import _REQUEST_COLS, _dumps

N = 2000


def event(i: int) -> dict:
    return {"level": 0, "index": i, "ok": True, "start_s": i * 0.01, "ttft_s": 0.1,
            "ttfat_s": 0.1, "e2e_s": 2.6, "tpot_s": 0.01, "output_tokens": 256,
            "prompt_tokens": 128, "token_source": "usage", "chunks": 256,
            "chunk_gaps_ms": [10.123] * 255, "finish_reason": "length", "status": 200}


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
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


if __name__ == "__main__":
    main()
