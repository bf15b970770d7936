"""Logs: the whole (bounded) server log with follow, search and level/rank filters."""

from __future__ import annotations

from textual.app import ComposeResult

from dsv4tui.tui.screens.base import LogBody
from dsv4tui.tui.widgets.log_view import LogPanel, LogView


class LogsBody(LogBody):
    MODE = "logs"
    AUTO_FOCUS = "LogView"

    def compose_body(self) -> ComposeResult:
        yield LogPanel(self.model.logs, title="server log  (/ search · n/N next/prev · "
                       "f follow · v level · t rank)", classes="panel", id="logs-log",
                       empty_text="no server log yet")

    def on_shown(self) -> None:
        self.query_one(LogView).focus()
