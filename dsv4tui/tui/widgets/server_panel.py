"""The server's own numbers (its Prometheus /metrics, sampled by the agent): running and queued
requests, KV token usage, prefix-cache hit rate, generation throughput, speculative accept
length, TTFT / ITL p50 and p99 over the last minute, each with a sparkline.

Generation throughput comes from the ``sglang:gen_throughput`` gauge; without /metrics (an
engine started without ``--enable-metrics``) it falls back to the decode log line and says so
(``gen (log)``). Values older than a few sampling intervals are shown as ``—`` with their age,
never as current. The panel's bottom border says where the numbers come from.
"""

from __future__ import annotations

from collections.abc import Sequence

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.widgets import Static

from dsv4tui.core.view.model import UiModel, fmt_duration, fmt_num, fmt_share
from dsv4tui.tui.clock import every_second
from dsv4tui.tui.widgets.spark import FastSparkline
from dsv4tui.tui.widgets.text import update_static

DECODE_STALE_S = 15.0  # SGLang logs a decode line every few seconds while it decodes
SPARK_POINTS = 60
SHRINK_AT = 6  # columns a cell's text must lose before the sparkline moves left
STALE_GRACE_S = 2.0  # a late /metrics sample greys the panel only after this much longer


def _ms(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    ms = seconds * 1000.0
    return f"{ms / 1000:.1f}s" if ms >= 10_000 else f"{ms:.0f}" if ms >= 10 else f"{ms:.1f}"


class Cell(Horizontal):
    """``label value`` and a sparkline of the value's recent history."""

    DEFAULT_CSS = """
    Cell { height: 1; width: 1fr; }
    Cell > Static { width: auto; height: 1; }
    Cell > FastSparkline { height: 1; width: 1fr; margin: 0 1 0 1; min-width: 4; }
    Cell > FastSparkline > .sparkline--max-color { color: $success; }
    Cell > FastSparkline > .sparkline--min-color { color: $primary 50%; }
    ServerPanel.-stale Cell > FastSparkline > .sparkline--max-color { color: $text-disabled; }
    ServerPanel.-stale Cell > FastSparkline > .sparkline--min-color { color: $text-disabled; }
    ServerPanel.-stale Cell > Static { color: $text-disabled; }
    """

    def __init__(self, key: str) -> None:
        super().__init__(id=f"sp-{key}")
        self.text = Static("", markup=True)
        self.spark = FastSparkline([])
        self._width = 0
        self._text: str | None = None

    def compose(self) -> ComposeResult:
        yield self.text
        yield self.spark

    def show(self, text: str, history: Sequence[float]) -> None:
        # The text's width is set only when it grows, or shrinks by more than SHRINK_AT: a
        # figure changing length (987.6 -> 1,012.3 tok/s) needs no layout pass, and the
        # sparkline beside it does not jitter sideways.
        if text != self._text:  # its markup parsed only when it changed
            self._text = text
            width = Content.from_markup(text).cell_length
            if width > self._width or width < self._width - SHRINK_AT:
                self._width = width
                self.text.styles.width = width
            update_static(self.text, text, fixed_height=True)
        data = list(history[-SPARK_POINTS:])
        if data != list(self.spark.data or ()):
            self.spark.data = data


class ServerPanel(Vertical):
    """Rows: gen · running | queue · kv | cache hit · TTFT · ITL · spec accept (when the
    server speculates). Few GPUs (``-compact`` on the side panel): gen, running | queue, TTFT."""

    DEFAULT_CSS = """
    ServerPanel { height: auto; }
    ServerPanel > Horizontal { height: 1; }
    ServerPanel > #sp-spec.-absent { display: none; }
    """

    def __init__(self, model: UiModel, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._late_since: float | None = None  # the newest sample too old since (monotonic)
        self.model = model
        self.cells = {k: Cell(k) for k in ("gen", "running", "queue", "kv", "cache", "ttft",
                                            "itl", "spec")}

    def compose(self) -> ComposeResult:
        c = self.cells
        yield c["gen"]
        with Horizontal(id="sp-load"):
            yield c["running"]
            yield c["queue"]
        with Horizontal(id="sp-memory"):
            yield c["kv"]
            yield c["cache"]
        yield c["ttft"]
        yield c["itl"]
        yield c["spec"]

    def on_mount(self) -> None:
        self.refresh_model()
        if self.model.frozen is None:  # values age out even when no new sample comes
            every_second(self, self._tick)

    def _tick(self) -> None:
        if self.screen.is_current:
            self.refresh_model()

    def source_text(self) -> str:
        """What the numbers are (for the side panel's bottom border)."""
        win, now = self.model.server_metrics, self.model.mono()
        if win.latest(now) is not None:
            sim = "simulated " if self.model.shows_simulated else ""
            return f"{sim}/metrics · {win.window_s:.0f} s · ≈ buckets"
        if win.last_error:
            return f"/metrics: {win.last_error}"[:60]
        age = win.age(now)
        if age is not None:
            return f"/metrics silent for {fmt_duration(age)}"
        return "no /metrics yet"

    def refresh_model(self) -> None:
        m = self.model
        win, now = m.server_metrics, m.mono()
        latest = win.latest(now)
        c = self.cells
        dash = "[b]—[/b]"

        def num(key: str, decimals: int = 0, scale: float = 1.0, unit: str = "") -> str:
            v = latest.get(key) if latest else None
            return dash if v is None else f"[b]{fmt_num(float(v) * scale, decimals)}[/b]{unit}"

        def hist(key: str, scale: float = 1.0) -> tuple[float, ...]:
            return tuple(v * scale for v in win.gauge(key, now, SPARK_POINTS).history)

        def pct(key: str) -> str:
            v = latest.get(key) if latest else None
            return f"[b]{fmt_share(float(v))}[/b]" if isinstance(v, (int, float)) else dash

        self._show_gen(latest, hist("gen_throughput"))
        c["running"].show(f"run {num('running')}", hist("running"))
        c["queue"].show(f"queue {num('queued')}", hist("queued"))
        c["kv"].show(f"kv {pct('token_usage')}", hist("token_usage", 100))
        c["cache"].show(f"cache hit {pct('cache_hit_rate')}",
                        hist("cache_hit_rate", 100))
        for key, label in (("ttft", "TTFT"), ("itl", "ITL")):
            q = win.quantiles(key, now)
            text = (f"{label} p50 [b]≈{_ms(q[0.5])}[/b] p99 [b]≈{_ms(q[0.99])}[/b] ms"
                    if latest and q[0.5] is not None else f"{label} p50/p99 {dash}")
            c[key].show(text, tuple(v * 1000 for v in win.quantile_history(key, 0.5)))
        spec = latest.get("spec_accept_length") if latest else None
        spec_hist = hist("spec_accept_length")
        c["spec"].set_class(spec is None and not spec_hist, "-absent")
        c["spec"].show(f"spec accept {num('spec_accept_length', 2)}", spec_hist)
        self.set_class(self._greyed(latest is None, now), "-stale")

    def _greyed(self, no_sample: bool, now: float) -> bool:
        """Whether the panel is drawn stale: at once when the link is down or no sample ever
        came; a sample that is only late (a loaded host) greys it after STALE_GRACE_S more,
        so late samples do not flip the class (a restyle of the panel) at every tick."""
        if self.model.conn.down or self.model.server_metrics.age(now) is None:
            return True
        if not no_sample:
            self._late_since = None
            return False
        if self._late_since is None:
            self._late_since = now
        return now - self._late_since >= STALE_GRACE_S

    def _show_gen(self, latest: dict[str, object] | None, history: tuple[float, ...]) -> None:
        m = self.model
        now = m.mono()
        badge = ""  # the host bar and the border say SIMULATED
        gen = latest.get("gen_throughput") if latest else None
        if isinstance(gen, (int, float)):
            # SGLang sets the gauge on each decode log line and leaves it when idle: with
            # nothing running, the rate is 0 and the gauge is only the last one seen
            if latest and not latest.get("running") and not latest.get("queued"):
                last = f"; last {fmt_num(float(gen), 1)}" if gen else ""
                text = f"gen [b]0[/b] tok/s [$foreground-muted](idle{last})[/]"
            else:
                text = f"gen [b]{fmt_num(float(gen), 1)}[/b] tok/s{badge}"
            if latest and self.parent is not None and self.parent.has_class("-tiny"):
                run, queued = latest.get("running"), latest.get("queued")
                text += "".join(
                    f" · {label} [b]{fmt_num(float(v), 0) if isinstance(v, (int, float)) else '—'}"
                    "[/b]" for label, v in (("run", run), ("q", queued)))
            self.cells["gen"].show(text, history)
            return
        # No gauge: the decode log line (SGLang logs one every few seconds while decoding).
        decode = m.decode.latest
        log_hist = m.decode.throughput()
        current = m.decode.current(now, DECODE_STALE_S)
        if current is not None:
            text = f"gen (log) [b]{fmt_num(current.gen_tok_s, 1)}[/b] tok/s{badge}"
        elif decode is not None:
            age = fmt_duration(max(0.0, now - decode.t))
            text = (f"gen [b]—[/b] [$foreground-muted](last {fmt_num(decode.gen_tok_s, 1)}, "
                    f"{age} ago)[/]{badge}")
        else:
            text = f"gen [b]—[/b] tok/s{badge}"
        self.cells["gen"].show(text, history or tuple(log_hist))
