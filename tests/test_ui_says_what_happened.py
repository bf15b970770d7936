"""The dashboard says what happened (issue 12): current numbers, named statistics, the
running backend, the Runs list at every width, the GPU panel on small terminals and small
hosts, text that cannot inject markup, the banner over dialogs."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from snapshot_apps.frozen import T0, frozen_app
from textual.widgets import DataTable, Static

from dsv4tui.core.campaign.columns import LEVEL_COLUMNS
from dsv4tui.core.server.metrics_window import MetricsWindow
from dsv4tui.core.telemetry import Frame, HostTelemetry
from dsv4tui.core.view import model as m
from dsv4tui.tui import keymap
from dsv4tui.tui.screens.help import HelpScreen
from dsv4tui.tui.screens.launch import profile_markup
from dsv4tui.tui.screens.messages import ALL, CONN, RUNS
from dsv4tui.tui.screens.modals import ConfirmScreen
from dsv4tui.tui.widgets.charts import plot_series
from dsv4tui.tui.widgets.host_bar import DialogBanner
from dsv4tui.tui.widgets.server_panel import DECODE_STALE_S, ServerPanel
from dsv4tui.tui.widgets.startup import StartupPanel


async def settle(pilot: Any) -> None:
    for _ in range(20):
        await pilot.pause()
        if not pilot.app.flush.pending:
            break
    await pilot.pause()


def cells(table: DataTable[Any], row: int) -> list[str]:
    return [c.plain if isinstance(c, Text) else str(c) for c in table.get_row_at(row)]


def headers(table: DataTable[Any]) -> list[str]:
    return [str(c.label) for c in table.ordered_columns]


# --- 3: the statistics are named, the same in both faces ------------------------------------

async def test_sweep_table_names_its_statistics() -> None:
    app = frozen_app("bench")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        cols = headers(app.screen.query_one("#bench-table", DataTable))
        assert [c.title for c in LEVEL_COLUMNS] == cols[2:2 + len(LEVEL_COLUMNS)]
        assert "TTFT p50" in cols and "TPOT p50" in cols and "TPOT" not in cols


# --- 6: numbers on screen are current --------------------------------------------------------

async def test_decode_numbers_age_out_and_say_so() -> None:
    """Without /metrics the server panel's gen throughput is the decode log line's, says so,
    and ages out instead of staying on screen as current."""
    app = frozen_app("dashboard")
    app.model.server_metrics = MetricsWindow()  # an engine without --enable-metrics
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        panel = app.screen.query_one(ServerPanel)
        fresh = str(panel.cells["gen"].text.render())
        assert "gen (log) 26.5 tok/s" in fresh
        app.model.frozen = T0 + DECODE_STALE_S + 61  # no decode line for a minute
        panel.refresh_model()
        stale = str(panel.cells["gen"].text.render())
        assert "gen — (last 26.5, 1m1" in stale and "ago)" in stale
        assert "run —" in str(panel.cells["running"].text.render())


async def test_a_failed_restart_stops_every_clock() -> None:
    app = frozen_app("launch")
    su = app.model.startup
    su.reset("mxfp4", "marlin", "MXFP4", T0 - 8.6)
    su.status = "starting"
    su.enter("load_weights", T0 - 8.0)
    su.finish("failed", T0)  # what the app does when server_control.restart raised
    assert su.phases["load_weights"].ended == T0
    async with app.run_test(size=(120, 40)) as pilot:
        app.model.frozen = T0 + 25  # 25 s later the screen still says what happened
        app.mark(*ALL)
        await settle(pilot)
        view = app.screen.query_one(StartupPanel)
        view.refresh_model()
        title = str(view.query_one(".su-title", Static).render())
        phases = str(view.query_one(".su-phases", Static).render())
        assert "failed" in title and "after 8.6s" in title
        assert "8.0s" in phases and "25" not in phases and "33" not in phases
        assert "✖" in phases and "✓" not in phases  # the phase it failed in is not done


def test_launch_panel_shows_the_running_backend_and_the_profiles() -> None:
    model = frozen_app("launch").model
    model.server.backend = "marlin"  # the profile says triton
    text = profile_markup(model)
    assert "running backend" in text and "[b]marlin[/b]" in text
    assert "profile backend" in text and "[b]triton[/b]" in text
    assert "moe backend" not in text
    # the next restart (r) uses the backend picked with b: said, not implied
    text = profile_markup(model, "marlin")
    import re

    assert re.search(r"next restart\s*\[/\] \[b\]marlin\[/b\]", text)
    model.server.backend = "triton"
    assert "moe backend" in profile_markup(model) and "running backend" not in profile_markup(model)


# --- 8 / 9: the Runs list --------------------------------------------------------------------

def _runs(app: Any) -> None:
    app.model.runs.rows = [
        m.RunRow(7, "NVFP4_flashinfer_cutlass", T0 - 60, "ct200", "flashinfer_cutlass",
                 "NVFP4", 31.2, "done", sanity_passed=True),
        m.RunRow(6, "broken", T0 - 120, "ct200", "marlin", "NVFP4", None, "failed",
                 sanity_passed=False),
        m.RunRow(5, "MXFP4_triton", T0 - 86400, "ct200", "triton", "MXFP4", 23.2, "done"),
    ]
    app.model.runs.marked = []
    app.mark(RUNS)


async def test_runs_list_hides_failed_sanity_runs_and_counts_them() -> None:
    app = frozen_app("runs")
    async with app.run_test(size=(160, 48)) as pilot:
        _runs(app)
        await settle(pilot)
        table = app.screen.query_one("#runs-table", DataTable)
        assert table.row_count == 2
        hint = str(app.screen.query_one("#runs-hint", Static).render())
        assert "1 failed-sanity run hidden" in hint and "h shows" in hint
        await pilot.press("h")
        await settle(pilot)
        assert table.row_count == 3
        assert "failed-sanity runs shown" in str(app.screen.query_one("#runs-hint").render())


async def test_runs_list_uses_its_width_and_keeps_ids() -> None:
    app = frozen_app("runs")
    async with app.run_test(size=(160, 48)) as pilot:
        _runs(app)
        await settle(pilot)
        table = app.screen.query_one("#runs-table", DataTable)
        cols = headers(table)
        assert cols[:3] == ["", "id", "label"] and "sanity" in cols and "host" in cols
        row = dict(zip([c.key.value for c in table.ordered_columns], cells(table, 0),
                       strict=True))
        assert row["id"].strip() == "7" and row["backend"] == "flashinfer_cutlass"
        assert row["label"] == "NVFP4_flashinfer_cutlass" and row["date"].startswith("20")
        used = sum(c.get_render_width(table) for c in table.ordered_columns)
        assert used >= table.size.width - 4  # no band of empty columns
    app = frozen_app("runs")
    async with app.run_test(size=(80, 24)) as pilot:
        _runs(app)
        await settle(pilot)
        table = app.screen.query_one("#runs-table", DataTable)
        keys = [c.key.value for c in table.ordered_columns]
        assert {"id", "best", "status"} <= set(keys) and "host" not in keys
        row = dict(zip(keys, cells(table, 0), strict=True))
        assert row["best"].strip() == "31.2" and row["status"] == "done"
        assert not row["date"].startswith("20")  # the year goes first
        used = sum(c.get_render_width(table) for c in table.ordered_columns)
        assert used <= table.size.width


async def test_help_shows_binding_ids_and_the_kernels_keys() -> None:
    app = frozen_app("dashboard")
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        table = app.screen.query_one(DataTable)
        ids = [str(table.get_row_at(i)[3]) for i in range(table.row_count)]
        assert "kernels.run" in ids and "runs.failed" in ids
        id_col = table.ordered_columns[3]
        assert id_col.get_render_width(table) - 2 >= max(len(i) for i in ids)
        right = table.region.x + sum(c.get_render_width(table) for c in table.ordered_columns)
        assert right <= table.region.right  # the id column is on screen, not cut
    # the key bar of the Profile screen shows k like every other key
    app = frozen_app("dashboard")
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("6")
        await settle(pilot)
        from dsv4tui.tui.screens.base import KeyBar

        bar = str(app.screen.query_one(KeyBar).render())
        assert "k Capture now" in bar
        assert keymap.BY_ID["kernels.run"].key == "k"


def test_compare_legend_is_not_drawn_over_the_bars() -> None:
    from dsv4tui.tui.widgets.charts import Series

    calls: list[tuple[str, dict[str, Any]]] = []

    class Plt:
        def __getattr__(self, name: str) -> Any:
            return lambda *a, **kw: calls.append((name, kw))

    legend = plot_series(Plt(), {"labels": ["C1", "C8"], "colors": [(1, 2, 3), (4, 5, 6)],
                                 "series": [Series("a", [1.0, 2.0]), Series("b", [2.0, 3.0])],
                                 "ylabel": "tok/s", "empty": "", "kind": "bars"})
    assert [name for name, _ in legend] == ["a", "b"]  # drawn by the chart, on its own row
    bars = next(kw for name, kw in calls if name == "multiple_bar")
    assert "labels" not in bars  # plotext's own legend would cover the first bars


# --- 9: the GPU panel on small terminals and small hosts -------------------------------------

async def test_gpu_panel_at_80x24_shows_all_eight_gpus() -> None:
    app = frozen_app("dashboard")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        box = app.screen.query_one("#gpu-box")
        assert box.max_scroll_y == 0 and not box.border_subtitle
    app = frozen_app("dashboard")
    async with app.run_test(size=(80, 20)) as pilot:  # smaller still: says how many
        await settle(pilot)
        await pilot.pause(0.1)
        box = app.screen.query_one("#gpu-box")
        assert box.max_scroll_y > 0 and "more GPUs below" in str(box.border_subtitle)


async def test_one_gpu_host_has_no_empty_band() -> None:
    app = frozen_app("dashboard")
    t = HostTelemetry("demo", clock=lambda: T0)
    for k in range(3):
        t.add(Frame.from_event({"type": "frame", "seq": k, "time": T0 - 3 + k, "interval": 1.0,
                                "source": "simulated", "driver": "x",
                                "gpus": [{"index": 0, "name": "H200", "util_gpu": 50}]}),
              received=T0 - 3 + k)
    app.model.telemetry = t
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        top = app.screen.query_one("#dash-top").region
        box = app.screen.query_one("#gpu-box").region
        assert box.height == 5 and top.height == box.height  # header, titles, one GPU
        assert app.screen.query_one("#dash-log").region.y == box.bottom


# --- 11: what reaches the screen -------------------------------------------------------------

async def test_labels_cannot_inject_markup_or_control_characters() -> None:
    app = frozen_app("runs")
    async with app.run_test(size=(160, 48)) as pilot:
        app.model.runs.rows = [m.RunRow(9, "[/]bad[red]x\x1b[2J", T0, "ct200", "[b]", None,
                                        1.0, "done")]
        app.mark(RUNS)
        await settle(pilot)
        table = app.screen.query_one("#runs-table", DataTable)
        row = cells(table, 0)
        assert "[/]bad[red]x\\x1b[2J" in row  # shown as it is, escaped, nothing parsed
        await pilot.press("B")  # the notification names the label too
        await pilot.pause()
        assert app.is_running


# --- 12: the connection banner over dialogs --------------------------------------------------

async def test_connection_banner_shows_while_a_dialog_is_open() -> None:
    app = frozen_app("dashboard")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        app.push_screen(ConfirmScreen("restart the server?", "really?"))
        await pilot.pause()
        app.model.conn.state = "reconnecting"
        app.model.conn.retry_in = lambda: 4.2
        app.mark(CONN, ALL)
        await pilot.pause(0.7)
        banner = app.screen.query_one(DialogBanner)
        assert banner.has_class("-visible") and banner.region.y == 0
        assert "reconnecting in 4s" in str(banner.render())
        app.model.conn.state = "connected"
        await pilot.pause(0.7)
        assert not banner.has_class("-visible")


def test_server_log_lines_cannot_drive_the_terminal() -> None:
    from dsv4tui.core.view.log_lines import LogLines

    logs = LogLines()
    logs.extend(["\x1b[32mINFO\x1b[0m ready", "evil \x1b]0;title\x07 \x1b[2J done",
                 "plain line [red]not markup[/]"])
    texts = logs.tail(3)
    assert texts[0] == "INFO ready"
    assert "\x1b" not in texts[1] and "\x07" not in texts[1] and texts[1].endswith("done")
    assert texts[2] == "plain line [red]not markup[/]"  # drawn as text, never parsed


async def test_sweep_table_keeps_the_status_column_at_80_columns() -> None:
    """At 80x24 the server's TTFT (then TTFT p99) gives way, never the level's status."""
    app = frozen_app("bench")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        table = app.screen.query_one("#bench-table", DataTable)
        cols = headers(table)
        assert cols[-1] == "status" and "tok/s" in cols and "TTFT p50" in cols
        assert sum(c.get_render_width(table) for c in table.ordered_columns) <= table.size.width
        assert [str(c) for c in table.get_row_at(0)][-1] == "done"
    async with frozen_app("bench").run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        cols = headers(pilot.app.screen.query_one("#bench-table", DataTable))
        assert [c.title for c in LEVEL_COLUMNS] == cols[2:2 + len(LEVEL_COLUMNS)]  # all there


async def test_campaign_matrix_at_80_columns_says_what_it_has_no_room_for() -> None:
    app = frozen_app("campaign")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        table = app.screen.query_one("#camp-matrix", DataTable)
        cols = headers(table)
        assert cols[:2] == ["variant", "state"] and "best Δ" in cols
        assert sum(c.get_render_width(table) for c in table.ordered_columns) <= table.size.width
        details = str(app.screen.query_one("#camp-details", Static).render())
        first = app.model.campaign.variants[0]
        assert f"{first.name}: " in details  # the line under the matrix, wrapped, never cut
        assert "startup" in details or "startup" in cols
    async with frozen_app("campaign").run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        cols = headers(pilot.app.screen.query_one("#camp-matrix", DataTable))
        assert {"startup", "weights", "KV", "graphs", "warm-up", "sanity"} <= set(cols)
        details = str(pilot.app.screen.query_one("#camp-details", Static).render())
        assert all(c in cols or c in details for c in ("runs", "MXFP4"))
