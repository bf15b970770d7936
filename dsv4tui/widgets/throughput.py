"""The server's own decode throughput (from its decode log lines): numbers + a sparkline."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from dsv4tui.screens.model import UiModel, fmt_num
from dsv4tui.widgets.host_bar import sim_badge
from dsv4tui.widgets.spark import FastSparkline
from dsv4tui.widgets.text import update_static


class ThroughputPanel(Vertical):
    """gen tok/s, running and queued requests, token usage; the gen tok/s history."""

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

    def refresh_model(self) -> None:
        latest = self.model.decode.latest
        nums = self._numbers
        if latest is None:
            text = f"{self.prefix}[$foreground-muted]no decode lines yet[/]"
        else:
            usage = ("" if latest.token_usage is None
                     else f"  kv [b]{latest.token_usage * 100:.0f}%[/b]")
            text = (f"{self.prefix}gen [b]{fmt_num(latest.gen_tok_s, 1)}[/b] tok/s  "
                    f"running [b]{latest.running if latest.running is not None else 'n/a'}[/b]  "
                    f"queue [b]{latest.queue if latest.queue is not None else 'n/a'}[/b]{usage}")
        if self.model.simulated and not self.prefix:
            text += "  " + sim_badge()
        update_static(nums, text, fixed_height=True)
        data = self.model.decode.throughput()
        self._spark.data = data[-120:]
        self.set_class(self.model.conn.down, "-stale")
