"""The log view: bounded memory under a flood, follow/pause with "N new lines", search with
next/previous, level and TP-rank filters, errors classified."""

from __future__ import annotations

import time
import tracemalloc

from textual.app import App, ComposeResult

from dsv4tui.core.view.log_lines import ERROR, INFO, WARNING, LogLines
from dsv4tui.tui.widgets.log_view import LogPanel, LogView


def line(i: int, rank: int = 0, text: str = "Decode batch, #running-req: 16") -> str:
    return f"[2026-03-02 09:16:{i % 60:02d} TP{rank}] {text} #{i}"


class LogApp(App[None]):
    def __init__(self, lines: LogLines) -> None:
        super().__init__()
        self.lines = lines

    def compose(self) -> ComposeResult:
        yield LogPanel(self.lines)


def test_classify_levels_ranks_and_tracebacks() -> None:
    ring = LogLines(100)
    ring.append(line(1, 3))
    ring.append("[2026-03-02 09:16:01 TP1] WARNING: something odd")
    ring.append("Traceback (most recent call last):")
    ring.append('  File "x.py", line 1, in f')
    ring.append("RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1968")
    ring.append("[2026-03-02 09:16:02 TP0] back to normal")
    ring.append("Loading shards:  8%|▊ | 1/12\rLoading shards: 100%|█| 12/12")
    levels = [ring.get(i).level for i in range(ring.first, ring.next)]  # type: ignore[union-attr]
    assert levels == [INFO, WARNING, ERROR, ERROR, ERROR, INFO, INFO]
    assert ring.get(0).tp == 3  # type: ignore[union-attr]
    assert ring.ranks == {0, 1, 3}
    assert ring.get(6).text == "Loading shards: 100%|█| 12/12"  # type: ignore[union-attr]


def test_ring_is_bounded_under_a_flood() -> None:
    ring = LogLines(5_000)
    ring.extend(line(i) for i in range(5_000))
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    t0 = time.perf_counter()
    for batch in range(20):  # 10 s of 2,000 lines/s
        ring.extend(line(i, i % 8) for i in range(batch * 1000, batch * 1000 + 1000))
    elapsed = time.perf_counter() - t0
    grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert len(ring) == 5_000
    assert ring.first == ring.next - 5_000
    assert grown < 2_000_000, grown  # replaced lines, not accumulated ones
    # ~0.5 s traced on a quiet machine, 1.2 s on a busy one: the bound catches a ring whose
    # appends grow with its size, not a slow runner
    assert elapsed < 10.0, elapsed


async def test_follow_pause_new_lines_and_resume() -> None:
    ring = LogLines(2_000)
    ring.extend(line(i) for i in range(300))
    app = LogApp(ring)
    async with app.run_test(size=(100, 20)) as pilot:
        panel = app.query_one(LogPanel)
        view = app.query_one(LogView)
        panel.sync()
        await pilot.pause()
        assert view.follow and view.scroll_y == view.max_scroll_y
        view.focus()
        await pilot.press("pageup")
        await pilot.pause()
        assert not view.follow
        top = view.scroll_y
        ring.extend(line(i) for i in range(300, 350))
        panel.sync()
        await pilot.pause()
        assert view.pending == 50
        assert view.scroll_y == top  # the lines under the user's eyes stay put
        assert "50 new lines" in view.status_text()
        # the ring drops old lines while paused: the view shifts so the same lines stay
        seq_on_top = view.seq_at(int(view.scroll_y))
        ring.extend(line(i) for i in range(350, 2_100))
        panel.sync()
        await pilot.pause()
        assert view.seq_at(int(view.scroll_y)) in (seq_on_top, ring.first)
        panel.toggle_follow()
        await pilot.pause()
        assert view.follow and view.pending == 0
        assert view.scroll_y == view.max_scroll_y


async def test_search_next_previous_and_filters() -> None:
    ring = LogLines(1_000)
    for i in range(200):
        ring.append(line(i, i % 4, "needle here" if i in (20, 120, 180) else "hay"))
    ring.append("Traceback (most recent call last):")
    ring.append("ValueError: boom")
    app = LogApp(ring)
    async with app.run_test(size=(100, 20)) as pilot:
        panel = app.query_one(LogPanel)
        view = app.query_one(LogView)
        panel.sync()
        panel.start_search()
        await pilot.press(*"needle", "enter")
        await pilot.pause()
        assert view.match_seq == 180  # from the end backwards
        assert not view.follow
        panel.next_match(forward=False)
        assert view.match_seq == 120
        panel.next_match(forward=False)
        assert view.match_seq == 20
        panel.next_match(forward=True)
        assert view.match_seq == 120

        view.min_level = ERROR
        await pilot.pause()
        assert view.row_count == 2
        view.min_level = INFO
        view.rank = 2
        await pilot.pause()
        assert view.row_count == 50 + 2  # TP2 lines plus the un-prefixed traceback lines
        view.cycle_rank()
        assert view.rank == 3
        view.cycle_rank()
        assert view.rank is None
        assert view.row_count == len(ring)


async def test_flood_does_not_block_input() -> None:
    """2,000 lines/s in 100 ms batches; a key still gets through fast."""
    ring = LogLines(20_000)
    app = LogApp(ring)
    async with app.run_test(size=(120, 40)) as pilot:
        panel = app.query_one(LogPanel)
        view = app.query_one(LogView)
        worst = 0.0
        n = 0
        for _batch in range(30):
            ring.extend(line(n + i, i % 8) for i in range(200))
            n += 200
            t0 = time.perf_counter()
            panel.sync()
            await pilot.pause()
            worst = max(worst, time.perf_counter() - t0)
        assert len(ring) == 6_000
        assert view.row_count == 6_000
        t0 = time.perf_counter()
        await pilot.press("f")  # nothing bound here: a plain round trip through the queue
        # ~0.05 s each on a quiet machine, 0.15 s worst on a busy one; a blocked loop (the
        # bug this guards) took many seconds. The bound is loose on purpose: three test
        # workers share CI's two cores (a batch once took 1.01 s there); the timing itself
        # is measured in benchmarks/ui_latency.py, not asserted here.
        assert time.perf_counter() - t0 < 3.0
        assert worst < 3.0, worst


async def test_a_long_line_says_it_goes_on_and_right_scrolls_to_the_rest() -> None:
    ring = LogLines(100)
    ring.append("short")
    ring.append("server_args=ServerArgs(" + ", ".join(f"flag_{i}={i}" for i in range(120))
                + ", tail_marker=1)")
    app = LogApp(ring)
    async with app.run_test(size=(80, 12)) as pilot:
        panel = app.query_one(LogPanel)
        panel.sync()
        view = panel.view
        view.focus()
        await pilot.pause()
        rows = [view.render_line(y).text for y in range(2)]
        assert rows[1].endswith("\u203a") and not rows[0].rstrip().endswith("\u203a")
        # the marker is in the last column the scrollbar leaves, not under it
        assert len(rows[1]) == view.scrollable_content_region.width < view.size.width
        assert "←/→ scroll" in view.status_text()
        await pilot.press("right")
        await pilot.pause()
        assert view.scroll_x >= view.scrollable_content_region.width // 2  # half a view a key
        assert view.render_line(1).text.startswith("\u2039")  # and says it has a left part
        await pilot.press(*["right"] * 60)
        await pilot.pause()
        assert "tail_marker=1)" in view.render_line(1).text  # the end of a 1,500-char line


async def test_search_marks_the_hit_and_scrolls_to_it() -> None:
    ring = LogLines(100)
    for i in range(5):
        ring.append(line(i))
    ring.append("x" * 300 + " needle here")
    app = LogApp(ring)
    async with app.run_test(size=(80, 12)) as pilot:
        panel = app.query_one(LogPanel)
        panel.sync()
        view = panel.view
        await pilot.pause()
        assert view.set_search("needle")
        await pilot.pause()
        assert view.scroll_x > 200  # the hit, 300 columns in, is on screen
        row = next(y for y in range(view.size.height)
                   if "needle" in view.render_line(y).text)
        strip = view.render_line(row)
        hit_style = view.get_component_rich_style("logview--hit")
        styled = [seg for seg in strip if "needle" in seg.text]
        assert styled and styled[0].style is not None
        assert styled[0].style.bgcolor == hit_style.bgcolor  # the hit itself is marked
