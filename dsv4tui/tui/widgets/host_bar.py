"""The host bar (who, connection, server state/phase, profile, backend, checkpoint, uptime,
SIMULATED) and the connection-lost banner with the reconnect countdown."""

from __future__ import annotations

from textual.timer import Timer
from textual.widgets import Static

from dsv4tui.core.view.model import PHASE_LABELS, UiModel, fmt_duration
from dsv4tui.tui.clock import every_second
from dsv4tui.tui.widgets.text import esc as escape  # markup- and control-safe
from dsv4tui.tui.widgets.text import update_static

_CONN_STYLE = {"connected": "$success", "connecting": "$warning", "reconnecting": "$warning",
               "lost": "$error", "failed": "$error", "closed": "$foreground-muted"}
_SERVER_STYLE = {"ready": "$success", "starting": "$warning", "stopping": "$warning",
                 "failed": "$error", "stopped": "$foreground-muted", "unknown": "$foreground-muted",
                 "pending": "$warning", "ended": "$error"}  # pending, ended: a Slurm job


def sim_badge() -> str:
    return "[reverse $sim-badge] SIMULATED [/]"


class HostBar(Static):
    """One line (two on a narrow terminal) about the host and its server."""

    DEFAULT_CSS = """
    HostBar {
        height: auto;
        max-height: 2;
        padding: 0 1;
        background: $panel;
        color: $foreground;
    }
    """

    def __init__(self, model: UiModel, *, id: str | None = None) -> None:
        super().__init__("", id=id, markup=True)
        self.model = model
        self._ticking = False  # the uptime / start-up time moves: redrawn each second

    def on_mount(self) -> None:
        self.refresh_model()
        every_second(self, self._tick)

    def _tick(self) -> None:
        if self._ticking:
            self.refresh_model()

    def on_resize(self) -> None:
        self.call_after_refresh(self.refresh_model)  # compact below 100 columns

    def refresh_model(self) -> None:
        m = self.model
        conn, srv = m.conn, m.server
        now = m.wall()
        parts = [f"[b]{escape(conn.host)}[/b] [{_CONN_STYLE.get(conn.state, '$foreground')}]"
                 f"{escape(conn.state)}[/]"]
        state = srv.state
        phase = ""
        if state == "starting" and srv.phase:
            phase = f" · {escape(PHASE_LABELS.get(srv.phase, srv.phase))}"
        uptime = srv.uptime_s(now) if state == "ready" else None  # since launch, not startup
        up = f" · up {fmt_duration(uptime)}" if uptime is not None else ""
        compact = 0 < self.size.width < 100
        parts.append(f"{'' if compact else 'server '}"
                     f"[{_SERVER_STYLE.get(state, '$foreground')}]{escape(state)}[/]{phase}{up}")
        profile = m.profile()
        prof = srv.profile or m.active_profile
        backend = srv.backend or (profile.backend if profile else None)
        ckpt = srv.checkpoint or (profile.checkpoint if profile else None)
        if compact:
            what = [f"[b]{escape(x)}[/b]" for x in (prof, backend, ckpt) if x]
            if srv.tp_size:
                what.append(f"TP{srv.tp_size}")
            if what:
                parts.append(" · ".join(what))
        else:
            if prof:
                parts.append(f"profile [b]{escape(prof)}[/b]")
            if backend:
                parts.append(f"backend [b]{escape(backend)}[/b]")
            if ckpt:
                parts.append(f"ckpt [b]{escape(ckpt)}[/b]")
            if srv.tp_size:
                parts.append(f"TP{srv.tp_size}")
        if srv.job:  # a Slurm host: its job's id and Slurm's state (reason while queued)
            parts.append(f"Slurm {escape(srv.job)}")
        if srv.nodes:
            parts.append(f"{len(srv.nodes)} nodes")
        if srv.node_error:  # an error on any node of a host made of nodes
            parts.append(f"[$error b]error on {escape(srv.node_error)}[/]")
        text = " │ ".join(parts)
        if m.shows_simulated:
            text += "  " + sim_badge()
        # a layout pass only when the bar may wrap differently (not for every uptime tick)
        last = getattr(self, "_dsv_text", None)
        update_static(self, text, fixed_height=last is not None and
                      abs(len(last) - len(text)) <= 2 and self.size.width >= 100)
        self._ticking = state in ("ready", "starting") and m.frozen is None


class ConnectionBanner(Static):
    """Shown while the link is down: what happened and when the next attempt is."""

    DEFAULT_CSS = """
    ConnectionBanner {
        display: none;
        height: auto;
        padding: 0 1;
        background: $error 70%;
        color: $text;
        text-style: bold;
    }
    ConnectionBanner.-visible { display: block; }
    ConnectionBanner.-connecting { background: $warning 50%; }
    """

    def __init__(self, model: UiModel, *, id: str | None = None) -> None:
        super().__init__("", id=id, markup=True)
        self.model = model
        self._timer: Timer | None = None

    def on_mount(self) -> None:
        self._timer = self.set_interval(0.5, self.refresh_model, pause=True)
        self.refresh_model()

    def refresh_model(self) -> None:
        conn = self.model.conn
        visible = conn.down or conn.state == "connecting"
        self.set_class(visible, "-visible")
        self.set_class(conn.state == "connecting", "-connecting")
        if not visible:
            if self._timer is not None:
                self._timer.pause()
            return
        host = escape(conn.host)
        if conn.state == "connecting":
            text = f"connecting to {host} …"
        elif conn.state == "failed":
            text = f"✖ {host}: {escape(conn.detail or 'connection failed')} — not retrying"
        else:
            retry = conn.retry_in() if conn.retry_in else None
            when = ("reconnecting now …" if retry is None or retry < 0.05
                    else f"reconnecting in {retry:.0f}s")
            attempt = f" (attempt {conn.attempts + 1})" if conn.attempts else ""
            detail = f": {escape(conn.detail)}" if conn.detail else ""
            text = (f"⚠ connection to {host} lost{detail} — {when}{attempt} · "
                    "panels show the last data seen")
        update_static(self, text)
        if self._timer is not None:
            self._timer.resume()


class DialogBanner(ConnectionBanner):
    """The connection banner on a dialog (the main screen's is under the dialog's shade and
    is not redrawn while the dialog is up): docked on top, it checks the link twice a second
    for as long as the dialog is open."""

    DEFAULT_CSS = """
    DialogBanner { dock: top; width: 100%; }
    """

    def on_mount(self) -> None:
        self.set_interval(0.5, self.refresh_model)
        self.refresh_model()

    def refresh_model(self) -> None:
        self._timer = None  # this banner's own interval keeps running (see on_mount)
        super().refresh_model()
