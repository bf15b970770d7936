"""The Runs list shows what other processes stored without ctrl+r: a second connection to the
real SQLite file (as a CLI sweep or `runs import` in another process would be) adds a run."""

from __future__ import annotations

from pathlib import Path

from plugins.pilot import until
from snapshot_apps.frozen import frozen_model

from dsv4tui.core.config import Settings
from dsv4tui.core.store import RunStore
from dsv4tui.core.view.runs import StoreChanges
from dsv4tui.tui.app import Dsv4App


def test_store_changes_sees_only_other_connections_commits(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    with RunStore(path) as mine, RunStore(path) as other:
        changes = StoreChanges()
        assert not changes.changed(mine)  # the first look only remembers
        mine.start_run(label="own", host="h")  # this connection's commit: no change to see
        assert not changes.changed(mine)
        other.start_run(label="theirs", host="h")
        assert changes.changed(mine)
        assert not changes.changed(mine)  # seen once


async def test_runs_list_shows_a_run_stored_by_another_process(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    store = RunStore(path)
    app = Dsv4App(settings=Settings(), model=frozen_model(), store=store, start_mode="runs")
    async with app.run_test(size=(120, 40)) as pilot:
        app.runs.open_store()
        await until(pilot, lambda: app.model.runs.rows == [], 10, "the (empty) list read")
        with RunStore(path) as other:
            run_id = other.start_run(label="from_the_cli", host="ct200")
        await until(pilot, lambda: [r.run_id for r in app.model.runs.rows] == [run_id], 10,
                    "the other process's run in the list")
    store.close()
