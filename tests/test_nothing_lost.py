"""Nothing lost, and say where it is (issue 23, points 12-14), with real parts: a sweep
against the simulator run by the host-side runner, the real CLI as a subprocess, real SQLite
files, and for the host disk a real small filesystem (a tmpfs mounted for the test).

- a console killed in the middle of a long journal's ingest attaches again from its last
  stored chunk, not from byte 0, and the re-attach adds nothing twice;
- the run store deleted or replaced under a running sweep is noticed (the file is no longer
  the one opened), said, the sweep exits non-zero and names ``campaign attach``, which brings
  every request back into the new store;
- the host's disk filling up under a sweep: the runner says so where the console reads it,
  ``campaign status`` says "host disk full", resume refuses until space is free, then runs
  what did not finish.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from plugins.campaigns import campaign_dirs, wait_ended
from plugins.sim import REPO, SimProcess, start_sim, subprocess_env

from dsv4tui.agent.campaign.journal import Journal, events
from dsv4tui.core import paths
from dsv4tui.core.store import RunStore
from dsv4tui.core.store import campaigns as cstore
from dsv4tui.main import main


@pytest.fixture(autouse=True)
def _agent_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    extra = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", str(REPO) + (os.pathsep + extra if extra else ""))


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[SimProcess]:
    proc = start_sim(tmp_path / "sim")
    try:
        proc.wait_ready()
        yield proc
    finally:
        proc.stop()


def _json(capsys: pytest.CaptureFixture[str]) -> Any:
    return json.loads(capsys.readouterr().out)


def console(*args: str) -> subprocess.Popen[str]:
    """The real CLI in its own process (so it can be killed like a user's terminal)."""
    return subprocess.Popen([sys.executable, "-m", "dsv4tui", *args], cwd=REPO,
                            env=subprocess_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def stored_requests(db: Path) -> int:
    """Requests in the store file now, read by another connection (0 while it has none)."""
    if not db.exists():
        return 0
    with sqlite3.connect(db, timeout=10) as probe:
        try:
            return int(probe.execute("SELECT count(*) FROM requests").fetchone()[0])
        except sqlite3.OperationalError:
            return 0


def wait_for(what: str, cond: Any, proc: subprocess.Popen[str] | None = None,
             timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if proc is not None and proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"the console ended ({proc.returncode}) before {what}:\n"
                                 f"{out[-2000:]}\n{err[-2000:]}")
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


# -- 14: the ingest checkpoint moves chunk by chunk -----------------------------------------

BIG = 12_000  # request events: more than two of follow's chunks, less than its 8 MiB read


def long_journal(sim: SimProcess, capsys: pytest.CaptureFixture[str]) -> tuple[str, int]:
    """A finished campaign whose journal holds ``BIG`` requests: a real sweep's journal (one
    level of 2 requests), its request event repeated with every index up to BIG, written by
    the runner's own Journal writer into a campaign directory of its own."""
    assert main(["sweep", "--url", sim.url, "--label", "long", "--levels", "1:2",
                 "--output-len", "8", "--no-sanity", "--json"]) == 0
    capsys.readouterr()
    [cdir] = campaign_dirs(paths.data_dir())
    wait_ended(cdir)
    evs = list(events(str(cdir / "journal.jsonl")))
    first = next(i for i, ev in enumerate(evs) if ev["type"] == "request")
    template = evs[first]
    rest = [ev for ev in evs[first:] if ev["type"] != "request"]
    big = cdir.parent / "20261201-000000-00aa"
    big.mkdir()
    for name in ("spec.json", "status.json", "runner.json"):
        (big / name).write_bytes((cdir / name).read_bytes())
    journal = Journal(str(big / "journal.jsonl"))
    for ev in [*evs[:first], *({**template, "index": i} for i in range(BIG)), *rest]:
        journal.write({k: v for k, v in ev.items() if k != "seq"})
    journal.close()
    return big.name, (big / "journal.jsonl").stat().st_size


@pytest.mark.e2e
def test_a_console_killed_mid_ingest_resumes_from_its_last_chunk_and_adds_nothing_twice(
        sim: SimProcess, capsys: pytest.CaptureFixture[str]) -> None:
    cid, size = long_journal(sim, capsys)
    assert size < 8 << 20  # one read of follow's: before the fix, one checkpoint at its end
    db = paths.store_file()
    attach = console("campaign", "attach", "local", cid, "--json")
    try:
        wait_for("half the requests stored", lambda: stored_requests(db) >= BIG // 2, attach)
    finally:
        attach.send_signal(signal.SIGKILL)  # the console dies mid-ingest
        attach.communicate(timeout=30)
    with RunStore() as store:
        row = cstore.get(store, cid)
        assert row is not None and row.state == "running"
        # the checkpoint is past what was stored in chunks before the kill (before: 0)
        assert 0 < row.journal_offset < size, row.journal_offset
        kept = store.query("SELECT count(*) AS n FROM requests")[0]["n"]
    assert main(["campaign", "attach", "local", cid, "--json"]) == 0
    out = _json(capsys)
    assert out["state"] == "done"
    with RunStore() as store:
        run_id = out["variants"][0]["run_id"]
        reqs = store.requests(run_id)
        assert len(reqs) == BIG and sorted(r["index"] for r in reqs) == list(range(BIG))
        total = store.query("SELECT count(*) AS n FROM requests")[0]["n"]
        assert total == BIG + 2 and kept >= BIG // 2  # the first sweep's 2, and nothing twice
        row = cstore.get(store, cid)
        assert row is not None and row.journal_offset == size


# -- 13: the store deleted or replaced under a running sweep --------------------------------

def test_a_write_to_a_replaced_store_is_refused_and_the_new_file_keeps_its_own_rows(
        tmp_path: Path) -> None:
    """Another store moved onto the path (``mv backup.sqlite3 runs.sqlite3``) while one is
    open: its writes are refused, and its -wal, still at the path, is not replayed into the
    new file (SQLite would: the new store would show the old one's runs, not its own)."""
    from dsv4tui.core.store import StoreReplaced

    db, other = tmp_path / "runs.sqlite3", tmp_path / "other.sqlite3"
    with RunStore(other) as store:
        store.start_run(label="kept", host="h")
    opened = RunStore(db)
    run_id = opened.start_run(label="old", host="h")
    os.replace(other, db)
    with pytest.raises(StoreReplaced, match=r"was replaced by another file \(device/inode"):
        opened.add_request(run_id, {"level": 0, "index": 0, "ok": True})
    opened.close()
    with RunStore(db) as store:
        assert [r.label for r in store.runs()] == ["kept"]


@pytest.mark.parametrize("how", ["deleted", "replaced"])
@pytest.mark.e2e
def test_a_store_deleted_or_replaced_under_a_sweep_is_said_and_attach_brings_it_all_back(
        sim: SimProcess, capsys: pytest.CaptureFixture[str], tmp_path: Path, how: str) -> None:
    db = paths.store_file()
    if how == "replaced":  # another store (say a backup moved into place), with a run of its own
        other = tmp_path / "other.sqlite3"
        with RunStore(other) as store:
            store.finish_run(store.start_run(label="kept", host="local"), "done")
    sweep = console("sweep", "--url", sim.url, "--label", "under", "--levels", "4:120",
                    "--output-len", "8", "--no-sanity")
    wait_for("the sweep's first requests stored", lambda: stored_requests(db) >= 10, sweep)
    if how == "deleted":
        for path in db.parent.glob(db.name + "*"):  # rm runs.sqlite3*
            path.unlink()
    else:
        os.replace(other, db)
    out, err = sweep.communicate(timeout=120)
    assert sweep.returncode == 1, (out, err)  # before: "120/120 done", exit 0
    assert "done" not in out  # no run reported as stored
    [cdir] = campaign_dirs(paths.data_dir())
    line = err.strip().splitlines()[-1]
    assert f"the run store {db} was {how}" in line, err
    assert f"dsv4tui campaign attach local {cdir.name}" in line, err
    # the sweep went on on the host; attach collects every request into the store now there
    wait_ended(cdir)
    assert main(["campaign", "attach", "local", cdir.name, "--json"]) == 0
    got = _json(capsys)
    assert got["state"] == "done"
    with RunStore() as store:
        runs = {r.label: r for r in store.runs()}
        assert set(runs) == ({"under", "kept"} if how == "replaced" else {"under"})
        reqs = store.requests(runs["under"].id)
        assert sorted(r["index"] for r in reqs) == list(range(120))
        assert runs["under"].status == "done"


# -- 12: the host's disk fills up under a sweep ---------------------------------------------

@pytest.fixture
def small_host_disk(tmp_path: Path) -> Iterator[Path]:
    """The local host's agent home (where campaign journals live) on a real 16 MiB tmpfs, so
    the runner meets a real ENOSPC from the kernel (no simulated errno). Needs root (CI runs
    as root); skipped where mounting is not permitted."""
    from plugins.campaigns import reap

    home = paths.local_agent_state_dir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m,mode=0700", "tmpfs",
                           str(home)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.strip() or done.returncode}")
    try:
        yield home
    finally:
        reap(tmp_path)  # the runners first: their files are on the tmpfs
        subprocess.run(["umount", "-l", str(home)], check=False)


def fill(path: Path) -> None:
    """Write ``path`` until the file system says it is full."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, b"\xff" * 65536)
    except OSError as exc:
        assert exc.errno == 28, exc  # ENOSPC
    finally:
        os.close(fd)


@pytest.mark.e2e
def test_a_full_host_disk_is_said_where_the_console_reads_and_resume_waits_for_space(
        sim: SimProcess, small_host_disk: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sweep = console("sweep", "--url", sim.url, "--label", "full", "--levels", "4:160",
                    "--output-len", "8", "--no-sanity")

    def journal_requests() -> int:
        found = list(small_host_disk.glob("campaigns/*/journal.jsonl"))
        return found[0].read_bytes().count(b'"type":"request"') if found else 0

    wait_for("the sweep's first requests in the journal", lambda: journal_requests() >= 20, sweep)
    filler = small_host_disk / "filler"
    fill(filler)
    out, err = sweep.communicate(timeout=120)
    # before: "interrupted ... (dsv4tui campaign resume HOST ID)", nothing about the disk
    assert sweep.returncode == 1, (out, err)
    assert "interrupted: host disk full: No space left on device" in out, out
    assert "note: host disk full" in err, err  # the runner's last journal event
    [cdir] = campaign_dirs(paths.data_dir())
    wait_ended(cdir)
    runner = json.loads((cdir / "runner.json").read_text())  # before: still "running"
    assert runner["state"] == "interrupted" and "host disk full" in runner["disk_full"]
    assert "host disk full" in (cdir / "runner.log").read_text()  # before: empty
    assert not (cdir / "reserve").exists()  # given back to say all this
    # every journal line is whole, and every request in it is in the store: nothing lost
    raw = (cdir / "journal.jsonl").read_bytes()
    assert raw.endswith(b"\n") and all(json.loads(ln) for ln in raw.splitlines())
    in_journal = raw.count(b'"type":"request"')
    with RunStore() as store:
        [run] = store.runs()
        assert run.status == "interrupted" and len(store.requests(run.id)) == in_journal

    assert main(["campaign", "status", "local", cdir.name, "--json"]) == 0
    status = _json(capsys)
    assert status["state"] == "interrupted" and status["disk_full"] is True
    assert status["reason"].startswith("host disk full") and \
        f"dsv4tui campaign resume local {cdir.name}" in status["reason"]
    # still full: resume refuses, saying why (before: "no output (see runner.log)")
    assert main(["campaign", "resume", "local", cdir.name]) == 1
    said = capsys.readouterr().err
    assert f"campaign {cdir.name} not resumed: host disk full" in said, said
    assert "runner.log" not in said
    # a new sweep is refused the same way, and leaves no campaign behind
    assert main(["sweep", "--url", sim.url, "--label", "more", "--levels", "1:2",
                 "--no-sanity"]) == 1
    said = capsys.readouterr().err
    assert "host disk full" in said and "nothing was started" in said, said
    assert campaign_dirs(paths.data_dir()) == [cdir]
    filler.unlink()  # space again: resume runs what did not finish
    assert main(["campaign", "resume", "local", cdir.name, "--json"]) == 0
    done = _json(capsys)
    assert done["state"] == "done" and not done.get("reason")
    with RunStore() as store:
        runs = sorted(store.runs(), key=lambda r: r.id)
        assert [r.status for r in runs] == ["interrupted", "done"]
        assert sorted(r["index"] for r in store.requests(runs[1].id)) == list(range(160))
