"""A restart's progress (phases, elapsed per phase and total, weights %), the error lines of
a failed start, and the sanity gate's result."""

from __future__ import annotations

import time

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.timer import Timer
from textual.widgets import ProgressBar, Static

from dsv4tui.core.campaign.labels import safe_text
from dsv4tui.core.server.startup import OTHER, STARTUP
from dsv4tui.core.view.model import PHASES, SanityView, UiModel, fmt_duration
from dsv4tui.tui.widgets.text import esc as escape  # markup- and control-safe
from dsv4tui.tui.widgets.text import update_static


class StartupPanel(Vertical):
    """Live while a restart runs (ticks at 4 Hz); a summary after it."""

    DEFAULT_CSS = """
    StartupPanel { height: auto; }
    StartupPanel > .su-title { height: 1; text-style: bold; }
    StartupPanel > .su-phases { height: auto; text-wrap: nowrap; text-overflow: ellipsis; }
    StartupPanel > ProgressBar { height: 1; margin: 0 0 0 2; }
    StartupPanel > ProgressBar.-hidden { display: none; }
    StartupPanel > .su-errors {
        height: auto; max-height: 10; display: none; color: $error;
        border: round $error; padding: 0 1;
    }
    StartupPanel > .su-errors.-visible { display: block; }
    """

    def __init__(self, model: UiModel, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.model = model
        self._timer: Timer | None = None

    def compose(self) -> ComposeResult:
        yield Static("", classes="su-title", markup=True)
        yield Static("", classes="su-phases", markup=True)
        yield ProgressBar(total=100, show_eta=False, id="weights-bar")
        yield Static("", classes="su-errors", markup=False)

    def on_mount(self) -> None:
        self._timer = self.set_interval(0.25, self.refresh_model, pause=True)
        self.refresh_model()

    def refresh_model(self) -> None:
        su = self.model.startup
        now = self.model.mono()
        if not su.active and su.ended is not None:
            now = su.ended  # an ended restart's clocks stand still
        title = self.query_one(".su-title", Static)
        what = " · ".join(escape(x) for x in (su.profile, su.checkpoint, su.backend) if x)
        status = {"idle": "[$foreground-muted]no restart yet[/]",
                  "stopping": "[$warning]stopping the old server …[/]",
                  "starting": "[$warning]starting …[/]",
                  "ready": "[$success]ready[/]",
                  "failed": "[$error]failed[/]"}.get(su.status, escape(su.status))
        if su.status == "ready" and su.startup_s is not None:  # the host's figure, named
            tot = f" in [b]{fmt_duration(su.startup_s)}[/b]"
        else:  # the console's clock (the old server's stop included)
            total = su.total(now)
            word = {"failed": "after", "ready": "in"}.get(su.status, " elapsed")
            tot = f" {word} [b]{fmt_duration(total)}[/b]" if total is not None else ""
        update_static(title, f"startup {status}{tot}" + (f"  ({what})" if what else ""),
                      fixed_height=True)
        rows: list[str] = []
        if su.status != "idle":
            if su.queue_wait_s is not None:  # before the startup: not one of its phases
                rows.append(f" [$success]✓[/] {'Slurm queue':<12} "
                            f"{fmt_duration(su.queue_wait_s):>7}  [$foreground-muted]PENDING "
                            "until the job's nodes were allocated (not part of the startup)[/]")
            for name in PHASES:
                ph = su.phases.get(name)
                if ph is None:
                    continue
                if ph.started is None:
                    mark = "[$foreground-muted]·[/]"
                elif su.status == "failed" and su.current == name:
                    mark = "[$error]✖[/]"  # the phase it failed in
                elif ph.ended is not None or (su.current != name and su.current is not None):
                    mark = "[$success]✓[/]"
                elif su.status == "failed":
                    mark = "[$error]✖[/]"
                else:
                    mark = "[$warning]⟳[/]"
                elapsed = ph.elapsed(now)
                secs = fmt_duration(elapsed) if elapsed is not None else ""
                detail = f"  [$foreground-muted]{escape(ph.detail)}[/]" if ph.detail else ""
                rows.append(f" {mark} {escape(ph.label):<12} {secs:>7}{detail}")
            other = su.other_s(now) if su.status == "ready" else None
            if other is not None:  # with it, the rows add up to the startup
                rows.append(f" [$foreground-muted]+[/] {'other':<12} {fmt_duration(other):>7}"
                            f"  [$foreground-muted]{OTHER}[/]")
                rows.append(f" [$foreground-muted]=[/] [b]{'startup':<12} "
                            f"{fmt_duration(su.startup_s):>7}[/b]  [$foreground-muted]"
                            f"{STARTUP.replace('->', '→')}[/]")
        if su.message:
            color = "$error" if su.status == "failed" else "$foreground-muted"
            rows.append(f"   [{color}]{escape(su.message)}[/]")
        table = "\n".join(rows)
        update_static(self.query_one(".su-phases", Static), table)
        bar = self.query_one(ProgressBar)
        show_bar = su.status == "starting" and su.current == "load_weights"
        bar.set_class(not show_bar, "-hidden")
        if show_bar:
            bar.update(progress=su.weights_pct or 0)
        errors = self.query_one(".su-errors", Static)
        errors.set_class(bool(su.error_lines), "-visible")
        if su.error_lines:
            errors.border_title = "errors from the server log"
            update_static(errors, "\n".join(safe_text(x) for x in su.error_lines[-12:]))
        if self._timer is not None:
            if su.active and self.model.frozen is None:
                self._timer.resume()
            else:
                self._timer.pause()


def sanity_markup(s: SanityView, *, detail: bool = True) -> str:
    color = {"passed": "$success", "failed": "$error", "error": "$error",
             "running": "$warning"}.get(s.status, "$foreground-muted")
    head = f"sanity [{color}][b]{escape(s.summary)}[/b][/]"
    if s.at is not None and s.status in ("passed", "failed", "error"):
        # when: a sanity run again with the same answer must not look like the old result
        head += f" [$foreground-muted]at {time.strftime('%H:%M:%S', time.localtime(s.at))}[/]"
    if s.backend or s.checkpoint:
        head += f" [$foreground-muted]({escape(' · '.join(x for x in (s.checkpoint, s.backend) if x))})[/]"
    if not detail:
        return head
    lines = [head]
    for c in s.cases:
        if c.passed is None:
            mark = "[$warning]…[/]"
        else:
            mark = "[$success]✓[/]" if c.passed else "[$error]✖[/]"
        answer = escape((c.answer or c.error or "").strip().replace("\n", " ⏎ ")[:60])
        secs = f" {c.seconds:.1f}s" if c.seconds is not None else ""
        line = f" {mark} {escape(c.name)} → [b]{answer or '—'}[/b]{secs}"
        if c.passed is False and c.expect:
            line += f" [$foreground-muted](expected /{escape(c.expect)}/)[/]"
        lines.append(line)
    if s.status == "error" and s.detail:
        lines.append(f" [$error]{escape(s.detail)}[/]")
    return "\n".join(lines)


class SanityResult(Static):
    DEFAULT_CSS = """
    SanityResult { height: auto; }
    """

    def __init__(self, model: UiModel, *, detail: bool = True, id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__("", id=id, classes=classes, markup=True)
        self.model = model
        self.detail = detail  # False: one line (its CSS height is fixed)

    def on_mount(self) -> None:
        self.refresh_model()

    def refresh_model(self) -> None:
        update_static(self, sanity_markup(self.model.sanity, detail=self.detail),
                      fixed_height=not self.detail)
