"""Dialogs: confirm, error, the backend/profile picker and the sweep plan."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from dsv4tui.core.campaign.labels import check_label, safe_text
from dsv4tui.core.campaign.load_text import goodput_text, parse_goodput, parse_levels, parse_rates
from dsv4tui.core.errors import UserError
from dsv4tui.core.view.choices import Choice
from dsv4tui.tui.widgets.text import esc as escape  # markup- and control-safe


def banner(screen: ModalScreen[Any]) -> ComposeResult:
    """The connection banner, on top of a dialog too (when the app has a host model)."""
    from dsv4tui.tui.widgets.host_bar import DialogBanner

    model = getattr(screen.app, "model", None)
    if model is not None and hasattr(model, "conn"):
        yield DialogBanner(model)


_MODAL_CSS = """
{name} {{ align: center middle; }}
{name} > Vertical {{
    width: 76; max-width: 100%; height: auto; max-height: 90%;
    border: thick $primary; background: $surface; padding: 0 1;
}}
{name} .dlg-buttons {{ height: auto; align-horizontal: right; margin-top: 1; }}
{name} .dlg-buttons Button {{ margin-left: 1; min-width: 10; }}
{name} .dlg-text {{ height: auto; margin: 1 0 0 0; }}
"""


class ConfirmScreen(ModalScreen[bool]):
    AUTO_FOCUS = "#yes"
    BINDINGS = [("escape,n", "answer(False)", "No"), ("y", "answer(True)", "Yes")]
    DEFAULT_CSS = _MODAL_CSS.format(name="ConfirmScreen")

    def __init__(self, title: str, message: str, *, yes: str = "Yes", no: str = "No",
                 danger: bool = False) -> None:
        super().__init__()
        self.title_text, self.message, self.yes, self.no = title, message, yes, no
        self.danger = danger

    def compose(self) -> ComposeResult:
        yield from banner(self)
        with Vertical() as box:
            box.border_title = self.title_text
            yield Static(self.message, classes="dlg-text", markup=True)
            with Horizontal(classes="dlg-buttons"):
                yield Button(f"{self.no} (n)", id="no")
                yield Button(f"{self.yes} (y)", id="yes",
                             variant="error" if self.danger else "primary")

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, value: bool) -> None:
        self.dismiss(value)


class ErrorScreen(ModalScreen[None]):
    """One failure, its message, and (when known) the lines that explain it."""

    AUTO_FOCUS = "#ok"  # on resume (a dialog pushed as the app exits is never composed)

    BINDINGS = [("escape,enter,q", "close", "Close")]
    DEFAULT_CSS = _MODAL_CSS.format(name="ErrorScreen") + """
    ErrorScreen > Vertical { border: thick $error; }
    ErrorScreen .dlg-details { height: auto; max-height: 14; color: $foreground-muted;
        margin-top: 1; }
    """

    def __init__(self, title: str, message: str, details: list[str] | None = None) -> None:
        super().__init__()
        self.title_text, self.message, self.details = title, message, details or []

    def compose(self) -> ComposeResult:
        yield from banner(self)
        with Vertical() as box:
            box.border_title = self.title_text
            yield Static(safe_text(self.message, keep_newlines=True), classes="dlg-text",
                         markup=False)
            if self.details:
                yield Static("\n".join(safe_text(d) for d in self.details[-12:]),
                             classes="dlg-details", markup=False)
            with Horizontal(classes="dlg-buttons"):
                yield Button("OK (enter)", id="ok", variant="error")

    @on(Button.Pressed)
    def _pressed(self) -> None:
        self.dismiss(None)

    def action_close(self) -> None:
        self.dismiss(None)


class PickerScreen(ModalScreen[str | None]):
    """Pick one of ``choices``; the current one is marked; enter applies, esc cancels."""

    BINDINGS = [("escape", "cancel", "Cancel")]
    DEFAULT_CSS = _MODAL_CSS.format(name="PickerScreen") + """
    PickerScreen OptionList { height: auto; max-height: 20; margin-top: 1; }
    PickerScreen .dlg-foot { color: $foreground-muted; height: auto; }
    """

    def __init__(self, title: str, intro: str, choices: list[Choice]) -> None:
        super().__init__()
        self.title_text, self.intro, self.choices = title, intro, choices

    def compose(self) -> ComposeResult:
        yield from banner(self)
        with Vertical() as box:
            box.border_title = self.title_text
            yield Static(self.intro, classes="dlg-text", markup=True)
            options = []
            for c in self.choices:
                mark = "● " if c.current else "  "
                note = f"\n    [dim]{escape(c.note)}[/dim]" if c.note else ""
                options.append(Option(f"{mark}[b]{escape(c.title)}[/b]"
                                      f"{' (current)' if c.current else ''}{note}",
                                      id=c.value, disabled=not c.enabled))
            yield OptionList(*options)
            yield Static("enter: apply (asks before restarting) · esc: cancel", classes="dlg-foot")

    def on_mount(self) -> None:
        ol = self.query_one(OptionList)
        ol.focus()
        for i, c in enumerate(self.choices):
            if c.current:
                ol.highlighted = i
                break

    @on(OptionList.OptionSelected)
    def _selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)


@dataclass(frozen=True)
class PlanInput:
    label: str
    levels: list[tuple[int, int]]
    input_len: int
    output_len: int
    rates: list[tuple[float, int]] = field(default_factory=list)
    goodput: dict[Any, float] | None = None  # {"ttft_ms": 500.0, ...}
    random_range_ratio: float = 1.0
    seed: int | None = None

    def plan_fields(self) -> dict[str, Any]:
        """The SweepPlan fields the dialog sets (over the config's [sweep])."""
        return {"levels": self.levels, "rates": self.rates, "input_len": self.input_len,
                "output_len": self.output_len, "goodput": self.goodput,
                "random_range_ratio": self.random_range_ratio, "seed": self.seed}



def _field(name: str, parse: Callable[[str], Any], text: str) -> Any:
    """The core's parser of one box; its error names the box."""
    try:
        return parse(text)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None


class SweepPlanScreen(ModalScreen[PlanInput | None]):
    """The sweep plan: label (default ``<checkpoint>_<backend>``), closed-loop levels, open-loop
    rate levels, goodput targets, lengths (with bench_serving's range ratio) and the seed."""

    BINDINGS = [("escape", "cancel", "Cancel")]
    DEFAULT_CSS = _MODAL_CSS.format(name="SweepPlanScreen") + """
    SweepPlanScreen Label { margin-top: 1; color: $foreground-muted; }
    SweepPlanScreen Input {
        width: 100%; height: 1; border: none; padding: 0 1; background: $panel;
    }
    SweepPlanScreen Input:focus { background: $primary 25%; border: none; }
    SweepPlanScreen .dlg-row { height: auto; }
    SweepPlanScreen .dlg-row > Vertical { height: auto; width: 1fr; margin-right: 1; }
    SweepPlanScreen .dlg-error { color: $error; height: auto; }
    SweepPlanScreen .dlg-gate { height: auto; margin-top: 1; }
    """

    def __init__(self, plan: PlanInput, gate: str) -> None:
        super().__init__()
        self.plan = plan
        self.gate = gate

    def compose(self) -> ComposeResult:
        yield from banner(self)
        p = self.plan
        with Vertical() as box:
            box.border_title = "sweep plan"
            yield Static(self.gate, classes="dlg-gate", markup=True)
            yield Label("label")
            yield Input(p.label, id="plan-label")
            yield Label("levels (C:n, …)")
            yield Input(",".join(f"{c}:{n}" for c, n in p.levels), id="plan-levels")
            with Horizontal(classes="dlg-row"):
                with Vertical():
                    yield Label("rates (req/s:n, …)")
                    yield Input(",".join(f"{r:g}:{n}" for r, n in p.rates), id="plan-rates",
                                placeholder="open loop, e.g. 2:100")
                with Vertical():
                    yield Label("goodput targets")
                    yield Input(goodput_text(p.goodput), id="plan-goodput",
                                placeholder="ttft:500,tpot:50")
            with Horizontal(classes="dlg-row"):
                with Vertical():
                    yield Label("input tokens")
                    yield Input(str(p.input_len), id="plan-in", type="integer")
                with Vertical():
                    yield Label("output tokens")
                    yield Input(str(p.output_len), id="plan-out", type="integer")
                with Vertical():
                    yield Label("range ratio")
                    yield Input(f"{p.random_range_ratio:g}", id="plan-ratio", type="number")
                with Vertical():
                    yield Label("seed")
                    yield Input("" if p.seed is None else str(p.seed), id="plan-seed",
                                type="integer", placeholder="random")
            yield Static("", classes="dlg-error")
            with Horizontal(classes="dlg-buttons"):
                yield Button("Cancel (esc)", id="cancel")
                yield Button("Start sweep", id="start", variant="primary")

    def on_mount(self) -> None:
        box = self.query_one("#plan-levels", Input)
        box.focus()  # enter in any field starts the sweep
        box.cursor_position = len(box.value)

    def _read(self) -> PlanInput | None:
        err = self.query_one(".dlg-error", Static)
        try:
            try:  # the core's rule: the CLI's --label and campaigns check the same
                label = check_label(self.query_one("#plan-label", Input).value)
            except UserError as exc:
                raise ValueError(exc.message) from None
            rates = _field("rates", parse_rates, self.query_one("#plan-rates", Input).value)
            levels = _field("levels", lambda t: parse_levels(t, required=not rates),
                            self.query_one("#plan-levels", Input).value)
            goodput = _field("goodput", parse_goodput,
                             self.query_one("#plan-goodput", Input).value)
            inp = int(self.query_one("#plan-in", Input).value or "0")
            out = int(self.query_one("#plan-out", Input).value or "0")
            if inp < 1 or out < 1:
                raise ValueError("input and output tokens must be >= 1")
            ratio = float(self.query_one("#plan-ratio", Input).value or "1")
            if not 0 <= ratio <= 1:
                raise ValueError("range ratio must be between 0 and 1 (1: fixed lengths)")
            seed_text = self.query_one("#plan-seed", Input).value.strip()
            seed = int(seed_text) if seed_text else None
        except ValueError as exc:
            err.update(escape(str(exc)))
            return None
        return PlanInput(label, levels, inp, out, rates, goodput, ratio, seed)

    @on(Input.Submitted)
    def _submitted(self) -> None:
        self._start()

    @on(Button.Pressed, "#start")
    def _start(self) -> None:
        plan = self._read()
        if plan is not None:
            self.dismiss(plan)

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)
