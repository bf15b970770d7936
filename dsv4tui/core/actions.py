"""Every keyboard action of the dashboard: binding id, default key, description (no textual
here: the config validates its ``[keymap]`` against this table; ``dsv4tui.tui.keymap`` turns it
into Textual bindings).

The screens build their ``BINDINGS`` from :data:`ACTIONS`, the Help screen lists it, the
command palette offers every entry, and the config's ``keymap`` (binding id -> keys, e.g.
``sweep = "ctrl+w"`` or ``"w,ctrl+w"``) remaps keys. A remap must not take a key another
binding answers to where both work (the same screen, or an app-wide key on any screen):
:func:`keymap_problems` says which.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Action:
    id: str
    key: str
    action: str  # a Textual action string, run on the node that owns the binding
    description: str  # short: the footer
    help: str  # one line: the Help screen and the command palette
    scope: str = "app"  # "app" | "logs" | "runs" | "compare" | "kernels" | "modal"
    show: bool = True  # in the footer
    key_display: str | None = None
    palette: bool = True


SCREENS = ("dashboard", "logs", "launch", "bench", "runs")

ACTIONS: tuple[Action, ...] = (
    Action("screen.dashboard", "1", "app.show('dashboard')", "Dash",
           "Dashboard: host, GPUs, log tail, server throughput", show=False),
    Action("screen.logs", "2", "app.show('logs')", "Logs", "Log view: the whole server log",
           show=False),
    Action("screen.launch", "3", "app.show('launch')", "Launch",
           "Launch: profile, backend, restart and startup progress", show=False),
    Action("screen.bench", "4", "app.show('bench')", "Bench",
           "Bench: sanity gate and concurrency sweep", show=False),
    Action("screen.runs", "5", "app.show('runs')", "Runs", "Runs: stored sweeps, compare",
           show=False),
    Action("screen.kernels", "6", "app.show('kernels')", "Kernels",
           "Kernels: where the server's GPU time goes, kernel by kernel (when installed)",
           show=False),
    Action("screen.campaign", "7", "app.show('campaign')", "Campaign",
           "Campaign: variants x levels of a campaign the host runs by itself", show=False),
    Action("screen.fleet", "0", "app.fleet", "Fleet",
           "Fleet: back to every host (a dashboard opened from the fleet)", show=False),
    Action("backend", "b", "app.pick_backend", "Backend",
           "Pick the MoE runner backend (then restart)"),
    Action("attention", "a", "app.pick_attention", "Attention",
           "Pick the attention backend (DeepSeek-V4: its attention and prefill kernels), "
           "then restart", show=False),
    Action("adopt", "A", "app.adopt", "Adopt",
           "Take over the server on the profile's port that dsv4tui did not start (its launch "
           "becomes a profile in the config)", show=False),
    Action("profile", "p", "app.pick_profile", "Profile",
           "Pick the host's launch profile (then restart)"),
    Action("restart", "r", "app.restart", "Restart", "Restart the server with the active profile"),
    Action("next_move", "m", "app.next_move", "Next move",
           "After a failed start: restart with the change it suggests (asks first)",
           show=False),
    Action("sanity", "s", "app.sanity", "Sanity", "Run the sanity prompts against the server"),
    Action("sweep", "w", "app.sweep", "Sweep", "Plan and start a concurrency sweep"),
    Action("cancel", "x", "app.cancel", "Cancel",
           "Cancel the running sweep, campaign or sanity check (finished requests are kept)",
           show=False),
    Action("compare", "c", "app.compare", "Compare",
           "Compare the marked runs (on the Campaign screen: the campaign's variants; on "
           "Kernels: the two marked captures, where the time moved)",
           show=False),
    Action("focus.logs", "l", "app.focus_logs", "Logs", "Focus the log view", show=False),
    Action("focus.gpus", "g", "app.focus_gpus", "GPUs", "Focus the GPU panel", show=False),
    Action("help", "question_mark", "app.help", "Help", "Every key and what it does",
           key_display="?"),
    Action("quit", "q", "app.quit_app", "Quit",
           "Quit (asks first while a sweep or restart runs)"),
    Action("screenshot", "ctrl+s", "app.save_screen", "Screenshot",
           "Save the screen as an SVG file (the data dir's screenshots folder)", show=False),
    # The log view (dashboard tail and the Logs screen).
    Action("log.search", "slash", "search", "Search", "Search the log (enter: find)",
           scope="logs", key_display="/"),
    Action("log.next", "n", "next_match", "Next", "Next search match", scope="logs", show=False),
    Action("log.previous", "N", "previous_match", "Prev", "Previous search match",
           scope="logs", show=False),
    Action("log.follow", "f", "toggle_follow", "Follow", "Follow the tail (toggle)",
           scope="logs"),
    Action("log.level", "v", "cycle_level", "Level", "Filter by level: all, warnings+, errors",
           scope="logs", show=False),
    Action("log.rank", "t", "cycle_rank", "Rank", "Filter by TP rank: all, TP0, TP1 ...",
           scope="logs", show=False),
    Action("log.node", "o", "cycle_node", "Node", "Filter by node (a host made of nodes): "
           "all, node 0, node 1 ...", scope="logs", show=False),
    # The Runs screen.
    Action("runs.mark", "space", "toggle_mark", "Mark", "Mark / unmark the run for compare",
           scope="runs"),
    Action("runs.filter", "slash", "filter", "Filter", "Filter runs by label, host, backend",
           scope="runs", key_display="/"),
    Action("runs.baseline", "B", "set_baseline", "Baseline",
           "Make the highlighted run the compare baseline", scope="runs", show=False),
    Action("runs.export", "e", "export", "Export", "Export the comparison (CSV + JSON)",
           scope="runs"),
    Action("runs.report", "R", "report", "Report",
           "Write the report of the marked runs (HTML: comparison, charts, launches, sanity)",
           scope="runs"),
    Action("runs.reload", "ctrl+r", "reload", "Reload", "Reload the runs from the store",
           scope="runs", show=False),
    Action("runs.failed", "h", "toggle_failed", "Failed",
           "Show / hide the runs whose sanity check failed", scope="runs"),
    # The comparison (Runs → c).
    Action("compare.metric", "m", "next_metric", "Metric",
           "Second chart: TTFT, TPOT, tensor pipe, tok/s per kW", scope="compare"),
    Action("compare.baseline", "B", "next_baseline", "Baseline",
           "Next run as the baseline of the % change column", scope="compare"),
    Action("compare.export", "e", "export", "Export", "Export the comparison (CSV + JSON)",
           scope="compare"),
    Action("compare.report", "R", "report", "Report",
           "Write this comparison's report (HTML: the table, charts, launches, sanity)",
           scope="compare"),
    Action("compare.back", "escape", "back", "Back", "Back to the runs list", scope="compare"),
    # The Kernels screen (6).
    Action("kernels.run", "k", "capture", "Capture now",
           "Capture the server's kernels now, under a steady load (stored with the server "
           "launch)", scope="kernels"),
    Action("kernels.mark", "space", "toggle_mark", "Mark",
           "Mark / unmark a capture (two marked: side by side, and Compare shows where the "
           "time moved; the first marked is A, the base)", scope="kernels"),
    Action("kernels.reload", "ctrl+r", "reload", "Reload", "Reload the stored captures",
           scope="kernels", show=False),
    # The Campaign screen (7).
    Action("campaign.start", "n", "start_campaign", "Start",
           "Start a campaign on this host (the config's [campaigns]; the demo has its own)",
           scope="campaign"),
    Action("campaign.baseline", "B", "next_baseline", "Baseline",
           "Next variant as the baseline of the % change column", scope="campaign"),
    # Modals
    Action("modal.close", "escape", "close", "Close", "Close the dialog", scope="modal",
           palette=False),
)

BY_ID: dict[str, Action] = {a.id: a for a in ACTIONS}



# Where each scope's keys work: app-wide keys work on every screen (a screen's own binding
# for the same key would win there), the others only on their screens (modal: dialogs).
_SHARES = {"app": {"app", "logs", "runs", "compare", "kernels", "campaign"},
           "logs": {"app", "logs"}, "runs": {"app", "runs"}, "compare": {"app", "compare"},
           "kernels": {"app", "kernels"}, "campaign": {"app", "campaign"},
           "modal": {"modal"}}
_KEY_NAMES = {"?": "question_mark", "/": "slash", " ": "space", ",": "comma"}
_DISPLAY = {"question_mark": "?", "slash": "/", "space": "space"}


def split_keys(keys: str) -> list[str]:
    """``"w, ctrl+w"`` -> ``["w", "ctrl+w"]`` (``?`` and ``/`` as Textual names them)."""
    return [_KEY_NAMES.get(k.strip(), k.strip()) for k in keys.split(",") if k.strip()]


def keys_of(keymap: Mapping[str, str]) -> dict[str, list[str]]:
    """Each binding id's keys under ``keymap`` (ids it does not name keep their default)."""
    return {a.id: split_keys(keymap[a.id]) if a.id in keymap else split_keys(a.key)
            for a in ACTIONS}


def keymap_problems(keymap: Mapping[str, str]) -> list[tuple[str, str]]:
    """``[(binding id, what is wrong)]``: unknown ids, empty keys, and a key that two
    bindings would answer to on the same screen (the remapped one named first)."""
    problems: list[tuple[str, str]] = []
    for binding_id, keys in keymap.items():
        if binding_id not in BY_ID:
            problems.append((binding_id, f"unknown binding id {binding_id!r}; valid: "
                                         f"{', '.join(BY_ID)}"))
        elif not isinstance(keys, str) or not split_keys(keys):
            problems.append((binding_id, "no key given (write e.g. \"ctrl+w\")"))
    if problems:
        return problems
    effective_keys = keys_of(keymap)
    for binding_id in keymap:
        mine = BY_ID[binding_id]
        for other in ACTIONS:
            if other.id == binding_id or other.scope not in _SHARES[mine.scope]:
                continue
            taken = sorted(set(effective_keys[binding_id]) & set(effective_keys[other.id]))
            if taken:
                how = ("also remapped to it" if other.id in keymap else "its default key")
                problems.append((binding_id, f"{display_key(','.join(taken))!r} is already the "
                                 f"key of {other.id!r} ({other.description}, {how}); pick "
                                 f"another key or remap {other.id} too"))
                break
    return problems


def display_key(key: str) -> str:
    return ",".join(_DISPLAY.get(k, k) for k in key.split(","))


def effective(keymap: Mapping[str, str]) -> Iterable[tuple[Action, str]]:
    """Each action with the key(s) it answers to under ``keymap``."""
    for a in ACTIONS:
        yield a, display_key(keymap.get(a.id, a.key))
