"""Launch: the active profile's fields, backend/profile pickers, restart and its progress
(after a failed start: its cause and the next move, ``m``), then the sanity gate that runs by
itself once the server is ready."""

from __future__ import annotations

from typing import Protocol

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from dsv4tui.core.server import next_move
from dsv4tui.core.view.model import UiModel
from dsv4tui.tui import keymap
from dsv4tui.tui.screens.base import LogBody
from dsv4tui.tui.screens.messages import PROFILES, SANITY, SERVER, STARTUP
from dsv4tui.tui.widgets.focus_mark import PanelScroll
from dsv4tui.tui.widgets.log_view import LogPanel
from dsv4tui.tui.widgets.startup import SanityResult, StartupPanel
from dsv4tui.tui.widgets.text import esc as escape  # markup- and control-safe
from dsv4tui.tui.widgets.text import update_static


def profile_markup(model: UiModel, next_backend: str | None = None) -> str:
    """The active profile's fields. The backend row says what the server runs; when that is
    not the profile's backend both are shown (each on its own row, never cut), and so is the
    backend the next restart (r) uses when that differs again (picked with b)."""
    prof = model.profile()
    if prof is None:
        return "[$foreground-muted]this host has no launch profiles[/]"
    srv = model.server
    runs_it = (srv.state in ("ready", "starting") and srv.backend is not None
               and srv.profile in (None, prof.name))
    nxt = next_backend or prof.backend
    backend_rows = []
    if runs_it and srv.backend != prof.backend:
        backend_rows += [("running backend", srv.backend or ""),
                         ("profile backend", prof.backend)]
    else:
        backend_rows.append(("moe backend", prof.backend))
    if nxt != prof.backend or backend_rows[0][0] == "running backend":
        backend_rows.append(("next restart", nxt))  # r: the backend picked with b, if any
    rows = [("profile", prof.name), ("checkpoint", prof.checkpoint),
            ("quantization", prof.quantization or "—"), *backend_rows,
            ("model", prof.model_path)]
    if prof.tp_size:
        rows.append(("tp size", str(prof.tp_size)))
    rows.extend(prof.fields)
    width = max(len(k) for k, _ in rows)
    lines = []
    for k, v in rows:
        if k in ("running backend", "profile backend", "next restart"):
            lines.append(f"[$warning]{escape(k):<{width}}[/] [b]{escape(v)}[/b]")
        else:
            lines.append(f"[$foreground-muted]{escape(k):<{width}}[/] {escape(v)}")
    others = [p.name for p in model.profiles if p.name != prof.name]
    if others:
        lines.append(f"\n[$foreground-muted]other profiles: {escape(', '.join(others))}[/]")
    return "\n".join(lines)


HINT_KEYS = (("backend", "backend"), ("attention", "attention"), ("profile", "profile"),
             ("restart", "restart"), ("sanity", "sanity"))


def hint_markup(km: dict[str, str]) -> str:
    """The panel's keys, as the keymap binds them (remapped keys too)."""
    parts = [f"[$primary]{escape(keymap.display_key(km.get(i, keymap.BY_ID[i].key)))}[/] {word}"
             for i, word in HINT_KEYS]
    return "  ".join(parts[:3]) + "\n" + "  ".join(parts[3:])


def next_move_markup(err: BaseException | None, km: dict[str, str]) -> str:
    """After a failed start: its cause, and the change the next-move key restarts with."""
    move = next_move.of_failed_start(err)
    if move is None:
        return ""
    lines = [f"[$error]cause[/] {escape(move.cause)}"]
    if move.runnable:
        key = keymap.display_key(km.get("next_move", keymap.BY_ID["next_move"].key))
        lines.append(f"[$primary]{escape(key)}[/] try [b]{escape(move.text())}[/b]")
    else:
        lines.append(f"[$foreground-muted]next: {escape(move.text())}[/]")
    return "\n".join(lines)


class NextLaunchFacts(Protocol):
    """What the Launch body shows of the next restart (the App's server controller)."""

    failed_start: BaseException | None  # the last restart's failure, if it failed

    def backend_for(self, profile: str | None) -> str: ...


class LaunchBody(LogBody):
    MODE = "launch"

    def __init__(self, model: UiModel, facts: NextLaunchFacts | None = None) -> None:
        super().__init__(model)
        self.facts = facts  # None: nothing picked, nothing failed (a body on its own)

    def compose_body(self) -> ComposeResult:
        m = self.model
        with PanelScroll(id="launch-profile", classes="panel") as left:
            left.border_title = "launch profile"
            yield Static("", id="profile-fields", markup=True)
            yield Static(hint_markup(getattr(self.app, "active_keymap", None) or {}),
                         id="launch-hint", markup=True)
        with Vertical(id="launch-right"):
            with Vertical(id="launch-startup", classes="panel") as box:
                box.border_title = "restart"
                yield StartupPanel(m)
                yield Static("", id="launch-next-move", markup=True).set_styles("display: none;")
            with Vertical(id="launch-sanity", classes="panel") as box:
                box.border_title = "sanity gate"
                yield SanityResult(m)
            yield LogPanel(m.logs, title="server log", classes="panel", id="launch-log",
                           empty_text="no server log yet")

    def refresh_body(self, parts: frozenset[str]) -> None:
        if parts & {PROFILES, SERVER}:
            prof = self.model.profile()
            facts = self.facts
            nxt = facts.backend_for(prof.name) if prof is not None and facts else None
            update_static(self.one(Static, "#profile-fields"), profile_markup(self.model, nxt))
        if STARTUP in parts:
            self.one(StartupPanel).refresh_model()
            failed = self.model.startup.status == "failed"
            err = self.facts.failed_start if failed and self.facts else None
            text = next_move_markup(err, getattr(self.app, "active_keymap", None) or {})
            box = self.one(Static, "#launch-next-move")
            update_static(box, text)
            box.display = bool(text)  # no room taken while nothing failed
        if SANITY in parts:
            self.one(SanityResult).refresh_model()
