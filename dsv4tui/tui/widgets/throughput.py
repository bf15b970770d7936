"""The server's own decode throughput (from its decode log lines): numbers + a sparkline."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from dsv4tui.core.view.model import UiModel, fmt_duration, fmt_num, fmt_share
from dsv4tui.tui.clock import every_second
from dsv4tui.tui.widgets.host_bar import sim_badge
from dsv4tui.tui.widgets.spark import FastSparkline
from dsv4tui.tui.widgets.text import update_static

DECODE_STALE_S = 15.0  # SGLang logs a decode line every few seconds while it decodes


class ThroughputPanel(Vertical):
    """gen tok/s, running and queued requests, token usage; the gen tok/s history.

    The numbers are the server's last decode line; when none came for ``DECODE_STALE_S``
    (the server went idle, the sweep ended) they are shown as the last values and their age,
    never as current: ``gen — (last 21.1 tok/s, 62s ago)``."""

    DEFAULT_CSS = """
    ThroughputPanel { height: auto; }
    ThroughputPanel > .tp-numbers { height: 1; }
    ThroughputPanel > Sparkline { height: 2; margin: 0 0; }
    ThroughputPanel > Sparkline > .sparkline--max-color { color: $success; }
    ThroughputPanel > Sparkline > .sparkline--min-color { color: $primary 50%; }
    ThroughputPanel.-stale > Sparkline > .sparkline--max-color { color: $text-disabled; }
    ThroughputPanel.-stale > Sparkline > .sparkline--min-color { color: $text-disabled; }
    ThroughputPanel.-stale > .tp-numbers { color: $text-disabled; }
    ThroughputPanel.-inline { layout: horizontal; height: 1; }
    ThroughputPanel.-inline > .tp-numbers { width: auto; }
    ThroughputPanel.-inline > Sparkline { height: 1; width: 1fr; margin: 0 0 0 2; }
    """

    def __init__(self, model: UiModel, *, id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.model = model
        self.prefix = "server " if classes and "-inline" in classes else ""
        self._numbers = Static("", classes="tp-numbers", markup=True)
        self._spark = FastSparkline([])

    def compose(self) -> ComposeResult:
        yield self._numbers
        yield self._spark

    def on_mount(self) -> None:
        self.refresh_model()
        if self.model.frozen is None:  # the numbers age out even when no new line comes
            every_second(self, self._tick)

    def _tick(self) -> None:
        if self.screen.is_current and self.model.decode.latest is not None:
            self.refresh_model()

    def refresh_model(self) -> None:
        m = self.model
        latest = m.decode.latest
        nums = self._numbers
        current = m.decode.current(m.mono(), DECODE_STALE_S)
        if latest is None:
            text = f"{self.prefix}[$foreground-muted]no decode lines yet[/]"
        elif current is None:
            age = fmt_duration(max(0.0, m.mono() - latest.t))
            text = (f"{self.prefix}gen [b]—[/b] [$foreground-muted](last "
                    f"{fmt_num(latest.gen_tok_s, 1)} tok/s, {age} ago)[/]  running [b]—[/b]")
        else:
            usage = ("" if latest.token_usage is None
                     else f"  kv [b]{fmt_share(latest.token_usage)}[/b]")
            text = (f"{self.prefix}gen [b]{fmt_num(latest.gen_tok_s, 1)}[/b] tok/s  "
                    f"running [b]{latest.running if latest.running is not None else 'n/a'}[/b]  "
                    f"queue [b]{latest.queue if latest.queue is not None else 'n/a'}[/b]{usage}")
        if self.model.shows_simulated and not self.prefix:
            text += "  " + sim_badge()
        # inline, the numbers are as wide as their text: a longer text needs a new layout
        # (else "gen — (last 24.2 tok/s, 1m ago)" is cut to the width of "gen 26.5 tok/s")
        update_static(nums, text, fixed_height=not self.prefix)
        data = self.model.decode.throughput()
        self._spark.data = data[-120:]
        self.set_class(self.model.conn.down, "-stale")
