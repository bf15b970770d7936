"""A kernel profile is stored with the launch and load it measured, and linked to a run only
when it was taken during or right after that run on the same launch (issue 12, point 2)."""

from __future__ import annotations

import time
from pathlib import Path

from dsv4tui.core.campaign import kernels as kp
from dsv4tui.core.store import RunStore
from dsv4tui.core.store import kernels as profiles

SUMMARY = {"type": "profile", "basis": "decode", "families": [], "kernels": [],
           "load": {"concurrency": 16, "output_len": 1024},
           "server": {"backend": "triton", "checkpoint": "MXFP4"}}


def launch(store: RunStore, pid: int, backend: str) -> int:
    return store.record_launch("ct200", "nvfp4", {"model_path": "/m", "pid": pid}, backend,
                               "NVFP4", {}, 60.0, True, None)


def status(pid: int, backend: str) -> dict[str, object]:
    return {"type": "status", "state": "ready", "pid": pid,
            "profile": {"name": "nvfp4", "moe_runner_backend": backend, "checkpoint": "NVFP4"}}


def test_context_is_what_the_server_runs(tmp_path: Path) -> None:
    with RunStore(tmp_path / "s.db") as store:
        launch(store, 111, "triton")
        marlin = launch(store, 222, "marlin")
        ctx = kp.context_from_status(store, "ct200", status(222, "marlin"))
        assert (ctx.launch_id, ctx.server_pid, ctx.backend) == (marlin, 222, "marlin")
        # a server we did not launch (or that is down): no launch, no pid
        assert kp.context_from_status(store, "ct200", status(999, "marlin")).launch_id is None
        down = kp.context_from_status(store, "ct200", {"state": "stopped", "pid": 222})
        assert down.server_pid is None and down.launch_id is None


def test_linked_only_to_a_run_on_the_same_launch_during_or_right_after(tmp_path: Path) -> None:
    with RunStore(tmp_path / "s.db") as store:
        old = launch(store, 111, "triton")
        new = launch(store, 222, "marlin")
        # the host's latest run is on the old launch (another backend) and was cancelled
        other = store.start_run(label="MXFP4_triton", host="ct200", backend="triton",
                                launch_id=old)
        store.finish_run(other, "cancelled")
        ctx = kp.context_from_status(store, "ct200", status(222, "marlin"))
        pid, run_id = kp.store_profile(store, SUMMARY, ctx, taken_at=time.time())
        assert run_id is None  # it was "the host's latest run" before
        stored = profiles.get_profile(store, pid)
        assert stored is not None and stored.run_id is None
        assert (stored.launch_id, stored.server_pid, stored.backend) == (new, 222, "marlin")
        assert stored.load == {"concurrency": 16, "output_len": 1024}
        assert stored.concurrency == 16 and stored.launch_text == f"launch {new}, pid 222, C=16"

        # a run on this launch that is running: linked
        run = store.start_run(label="NVFP4_marlin", host="ct200", backend="marlin",
                              launch_id=new)
        _, run_id = kp.store_profile(store, SUMMARY, ctx, taken_at=time.time())
        assert run_id == run
        # ended a minute ago: still its profile; ended an hour ago: not any more
        store.finish_run(run, "done")
        assert kp.run_for_profile(store, ctx, time.time() + 60) == run
        assert kp.run_for_profile(store, ctx, time.time() + 3600) is None
        # an explicit run (the CLI's --run) is kept, with what really ran
        _, run_id = kp.store_profile(store, SUMMARY, ctx, run_id=other, taken_at=time.time())
        assert run_id == other


def test_an_older_store_gets_the_new_columns(tmp_path: Path) -> None:
    """Stores whose kernel_profiles table predates launch_id/server_pid/load_json."""
    with RunStore(tmp_path / "s.db") as store:
        with store.transaction() as db:
            db.execute("DROP TABLE kernel_profiles")
            for statement in profiles.PROFILES_MIGRATION:
                db.execute(statement)
        pid = profiles.save_profile(store, SUMMARY, host="ct200", launch_id=None,
                                    server_pid=7)
        assert profiles.get_profile(store, pid).server_pid == 7  # type: ignore[union-attr]


def test_without_a_recorded_launch_the_server_start_decides(tmp_path: Path) -> None:
    """The dashboard's restarts may not record launches: then a run that started after the
    server process did (same host, same profile) is on this server; one before is not."""
    with RunStore(tmp_path / "s.db") as store:
        before = store.start_run(label="old", host="ct200", profile_name="nvfp4")
        store.finish_run(before, "done")
        started = time.time() + 0.01
        st = {**status(333, "marlin"), "started_at": started}
        ctx = kp.context_from_status(store, "ct200", st)
        assert ctx.launch_id is None and ctx.server_started_at == started
        assert kp.run_for_profile(store, ctx, time.time()) is None  # before this server
        time.sleep(0.02)
        run = store.start_run(label="new", host="ct200", profile_name="nvfp4")
        assert kp.run_for_profile(store, ctx, time.time()) == run
        other = kp.context_from_status(store, "ct200", {**st, "profile": {"name": "mxfp4"}})
        assert kp.run_for_profile(store, other, time.time()) is None  # another profile
