"""The dialogs the dashboard's keys open, worded from the model and the core: the backend,
attention, profile and campaign pickers, the confirms of a restart, an adopt, a campaign and
a quit, the sweep plan, and the title of a worker's error dialog."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dsv4tui.core.server import sglang_choices
from dsv4tui.core.view.choices import Choice
from dsv4tui.core.view.model import ProfileChoice
from dsv4tui.tui.screens.modals import ConfirmScreen, PickerScreen, PlanInput, SweepPlanScreen
from dsv4tui.tui.widgets.text import esc

# a failed worker's group -> the error dialog's title
ERROR_TITLES = {"connect": "cannot connect", "server": "restart failed",
                "sanity": "sanity check could not run", "sweep": "sweep stopped",
                "store": "run store", "status": "server status", "export": "export failed",
                "report": "report failed"}


def error_title(group: str | None, name: str) -> str:
    return ERROR_TITLES.get(group or "", f"{name} failed")


def _profile_line(prof: ProfileChoice) -> str:
    return f"profile [b]{esc(prof.name)}[/b] · checkpoint [b]{esc(prof.checkpoint)}[/b]"


def backend_picker(prof: ProfileChoice, choices: list[Choice],
                   capability: str | None = None) -> PickerScreen:
    arch = sglang_choices.sm_name(capability)
    intro = (f"{_profile_line(prof)}"
             f"{' · ' + esc(prof.quantization) if prof.quantization else ''}"
             f" · GPUs {esc(arch or 'unknown')}\n"
             "only the backends that fit this checkpoint are listed; ✗: its kernels do not "
             "run on these GPUs")
    return PickerScreen("MoE backend", intro, choices)


def attention_picker(profile: str, version: str | None, capability: str | None,
                     simulated: bool, choices: list[Choice]) -> PickerScreen:
    lists, _ = sglang_choices.lists_for(version)
    arch = sglang_choices.sm_name(capability)
    intro = (f"profile [b]{esc(profile)}[/b] · SGLang {esc(version or '?')} (choices of "
             f"{esc(lists.version)}) · GPUs {esc(arch or 'unknown')}"
             f"{' (SIMULATED)' if simulated else ''}\n"
             "✗: SGLang's kernels for it do not run on these GPUs")
    return PickerScreen("attention backend", intro, choices)


def profile_picker(choices: list[Choice]) -> PickerScreen:
    return PickerScreen("launch profile", "the host's launch profiles", choices)


def restart_confirm(prof: ProfileChoice, backend: str, state: str,
                    changes: list[tuple[str, str | None, str | None]]) -> ConfirmScreen:
    """``changes``: (flag field, before, after) of the attention flags this restart changes."""
    stop = ("the running server is stopped first" if state in ("ready", "starting")
            else f"the server is {state}")
    msg = (f"{_profile_line(prof)} · backend [b]{esc(backend)}[/b]\n{esc(stop)}; then the "
           "sanity prompts run.")
    for key, before, after in changes:
        msg += (f"\n[b]--{esc(key.replace('_', '-'))}[/b]: {esc(before or 'unset')} → "
                f"[b]{esc(after or 'unset')}[/b]")
    return ConfirmScreen("restart the server?", msg, yes="Restart")


def sweep_plan(label: str, plan: Any, sanity_summary: str) -> SweepPlanScreen:
    """The sweep plan dialog over ``plan`` (the config's ``[sweep]``)."""
    gate = f"the sanity prompts run first · last result: {esc(sanity_summary)}"
    return SweepPlanScreen(PlanInput(label, list(plan.levels), plan.input_len, plan.output_len,
                                     list(plan.rates), plan.goodput, plan.random_range_ratio,
                                     plan.seed), gate)


def big_plan_confirm(estimate: dict[str, Any]) -> ConfirmScreen:
    """A sweep plan over the size one would mean (``core.campaign.sweep.plan_estimate``)."""
    why = " and ".join(estimate.get("confirm") or [])
    msg = (f"this plan is [b]{esc(why)}[/b]:\n{esc(str(estimate.get('text') or ''))}\n"
           "(the CLI needs --yes for it)")
    return ConfirmScreen("start this sweep?", msg, yes="Start anyway", danger=True)


def adopt_confirm(lines: list[str], path: Path) -> ConfirmScreen:
    text = "\n".join(esc(line) for line in lines)
    msg = f"{text}\n\nwrite it to [b]{esc(str(path))}[/b]? Nothing is stopped."
    return ConfirmScreen("adopt this server?", msg, yes="Adopt")


def campaign_picker(host: str, choices: list[Choice]) -> PickerScreen:
    return PickerScreen("start a campaign", f"campaigns for {host} — each variant: restart → "
                        "sanity → sweep, on the host", choices)


def campaign_confirm(name: str, plan: Any) -> ConfirmScreen:
    """``plan``: the resolved ``campaign.plan.CampaignPlan``."""
    levels = ", ".join(f"C={c}:{n}" for c, n in plan.sweep.levels)
    names = ", ".join(v.name for v in plan.variants)
    msg = (f"[b]{len(plan.variants)}[/b] variants ({names}) · sweep {levels} · "
           f"on failure {plan.on_failure}\nthe running server is stopped first; the "
           "campaign goes on by itself if this console goes away.")
    return ConfirmScreen(f"start campaign {name}?", msg, yes="Start")


def cancel_confirm(what: str, host: str) -> ConfirmScreen:
    """``what``: 'sweep' or 'campaign', running on ``host``."""
    return ConfirmScreen(f"cancel the {what}?", f"the running {what} on {esc(host)} stops; "
                         "the requests that finished stay stored.", yes="Cancel it",
                         no="Keep it running", danger=True)


def quit_confirm(what: str) -> ConfirmScreen:
    return ConfirmScreen("quit?", what, yes="Quit", danger=True)
