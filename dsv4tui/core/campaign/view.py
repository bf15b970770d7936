"""A campaign as the dashboard shows it, built live from its journal events (pure data, no
textual): the matrix of variants x levels, each cell's state, the current variant, elapsed
time and an ETA. The CLI's matrix of a finished campaign (matrix.py) reads the store; this
one follows the events as they arrive, so a second console sees the same state.

Across repeats (``repeats = k``: each a run on a restarted server) a variant keeps every run's
output tok/s per level, so its best tok/s against the baseline's gets a 95 % interval and a
verdict (:func:`best_effect`, verdict.speed_effect); its last launch's startup phases (weights,
KV cache, CUDA graphs, warm-up) and its kernel families line (from the store, when a capture
is linked to one of its runs) sit beside them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dsv4tui.agent import events as ev_t
from dsv4tui.core.campaign import reducer
from dsv4tui.core.campaign.startup_phases import phase_seconds
from dsv4tui.core.campaign.verdict import Effect, speed_effect

VARIANT_ACTIVE = ("restarting", "sanity", "running")
ENDED = ("done", "failed", "cancelled", "interrupted")


@dataclass
class Cell:
    """One level of one variant's (last) run."""

    requests: int
    completed: int = 0
    errors: int = 0
    state: str = "pending"  # pending | running | done | partial | failed | busy
    tok_s: float | None = None

    def text(self) -> str:
        if self.state == "pending":
            return "·"
        if self.state == "running":
            return f"{self.completed + self.errors}/{self.requests}"
        tok = f"{self.tok_s:.1f}" if self.tok_s is not None else "n/a"
        return tok if self.state == "done" else f"{tok} {self.state}"


@dataclass
class VariantView:
    name: str
    label: str
    state: str = "pending"  # pending | restarting | sanity | running | done | partial |
    #                          failed | cancelled | skipped | interrupted
    phase: str | None = None  # the startup phase while restarting
    startup_s: float | None = None
    sanity: bool | None = None
    reason: str | None = None
    error_lines: list[str] = field(default_factory=list)
    cells: list[Cell] = field(default_factory=list)
    run_keys: list[str] = field(default_factory=list)
    run_ids: list[int] = field(default_factory=list)
    started: float | None = None  # console monotonic
    ended: float | None = None
    backend: str | None = None  # what it ran (from the host)
    checkpoint: str | None = None
    run_tok_s: dict[str, dict[int, float]] = field(default_factory=dict)  # run -> level -> tok/s
    phases: dict[str, float] = field(default_factory=dict)  # its last launch's, in seconds
    kernels: str | None = None  # its families line (variant_kernels.VariantKernels.short)

    @property
    def active(self) -> bool:
        return self.state in VARIANT_ACTIVE

    def bests(self) -> list[float]:
        """Each finished run's best output tok/s (over its levels): one value per repeat."""
        out = [max(by.values()) for by in self.run_tok_s.values() if by]
        if not out:  # a view without per-run values (built by hand): its cells' run
            done = [c.tok_s for c in self.cells if c.tok_s is not None
                    and c.state in ("done", "partial")]
            out = [max(done)] if done else []
        return out


def best_effect(v: VariantView, base: VariantView | None) -> Effect | None:
    """``v``'s best tok/s against the baseline variant's, per repeat (Welch on the logs, a
    95 % interval when both have 2+ runs); None until both have finished a run."""
    if base is None or v is base or v.state not in ("done", "partial") or \
            base.state not in ("done", "partial"):
        return None
    mine, theirs = v.bests(), base.bests()
    if not mine or not theirs:
        return None
    return speed_effect("output_tok_s", mine, theirs)


@dataclass
class CampaignView:
    state: str = "idle"  # idle | starting | running | done | failed | cancelled | interrupted
    id: str | None = None
    name: str | None = None
    kind: str = "campaign"
    host: str | None = None
    levels: list[tuple[int, int]] = field(default_factory=list)
    repeats: int = 1
    variants: list[VariantView] = field(default_factory=list)
    current: int | None = None
    started: float | None = None
    ended: float | None = None
    detail: str | None = None
    server: str | None = None
    torn: int = 0
    baseline: int = 0  # the variant the comparison's % change is against

    @property
    def running(self) -> bool:
        return self.state in ("starting", "running")

    def elapsed(self, now: float) -> float | None:
        if self.started is None:
            return None
        return max(0.0, (self.ended if self.ended is not None else now) - self.started)

    def eta(self, now: float) -> float | None:
        """Seconds left: the finished variants' mean duration times those still to run."""
        finished = [v for v in self.variants if v.started is not None and v.ended is not None
                    and v.state != "skipped"]
        left = [v for v in self.variants if v.state in ("pending", *VARIANT_ACTIVE)]
        if not self.running or not finished or not left:
            return None
        spans = [float(v.ended or 0.0) - float(v.started or 0.0) for v in finished]
        mean = sum(spans) / len(spans)
        cur = next((v for v in left if v.active and v.started is not None), None)
        spent = now - cur.started if cur is not None and cur.started is not None else 0.0
        return max(0.0, mean * len(left) - min(spent, mean))

    def variant(self, vi: Any) -> VariantView | None:
        try:
            return self.variants[int(vi)]
        except (TypeError, ValueError, IndexError):
            return None

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for v in self.variants:
            out[v.state] = out.get(v.state, 0) + 1
        return out


def _cells(levels: list[tuple[int, int]]) -> list[Cell]:
    return [Cell(requests=n) for _, n in levels]


def apply_campaign_event(cv: CampaignView, ev: dict[str, Any], now: float) -> bool:
    """One journal event (or ingest's run_stored); True when the view changed."""
    return bool(reducer.fold(_CampaignFold(cv, now), ev))


class _CampaignFold(reducer.Reader):
    """The matrix's reading of the journal (each callback: True when the view changed)."""

    def __init__(self, cv: CampaignView, now: float) -> None:
        self.cv, self.now = cv, now

    def _v(self, ev: Any) -> VariantView | None:
        return self.cv.variant(ev.get("variant")) if "variant" in ev else None

    def campaign_start(self, ev: ev_t.CampaignStartEvent) -> bool:
        cv = self.cv
        plan = ev.get("plan") or {}
        cv.levels = [(int(c), int(n)) for c, n in plan.get("levels") or []]
        cv.repeats = int(ev.get("repeats") or 1)
        cv.name = ev.get("name") or cv.name
        cv.kind = str(ev.get("kind") or cv.kind)
        if not cv.variants:
            cv.variants = [VariantView(str(v.get("name")), str(v.get("label") or v.get("name")),
                                       cells=_cells(cv.levels))
                           for v in ev.get("variants") or []]
        cv.state = "running"
        if cv.started is None:
            cv.started = self.now
        return True

    def campaign_resume(self, ev: ev_t.CampaignResumeEvent) -> bool:
        cv = self.cv
        cv.state, cv.ended, cv.detail = "running", None, f"resumed (attempt {ev.get('attempt')})"
        return True

    def variant_start(self, ev: ev_t.VariantStartEvent) -> bool:
        v = self._v(ev)
        if v is None:
            return False
        self.cv.current = int(ev["variant"])
        v.state = "restarting" if ev.get("restart") else "running"
        v.reason, v.error_lines, v.started, v.ended = None, [], self.now, None
        v.cells = _cells(self.cv.levels)
        return True

    def log_event(self, ev: ev_t.LogEvent) -> bool:
        v = self._v(ev)
        if v is None or v.state != "restarting":
            return False
        inner = ev.get("event") or {}
        if inner.get("kind") == "phase" and inner.get("name"):
            v.phase = str(inner["name"])
            return True
        return False

    def launch_end(self, ev: ev_t.LaunchEndEvent) -> bool:
        v = self._v(ev)
        if v is None:
            return False
        if ev.get("ok"):
            v.startup_s = ev.get("startup_s")
            v.phase = "ready"
            v.phases = phase_seconds(ev.get("phases"))
        else:
            v.reason = str(ev.get("error") or "the server did not start")
            v.error_lines = [str(x) for x in ev.get("last_errors") or []]
        return True

    def run_start(self, ev: ev_t.RunStartEvent) -> bool:
        v = self._v(ev)
        if v is None:
            return False
        v.run_keys.append(str(ev.get("run")))
        v.cells = _cells(self.cv.levels)
        v.state = "sanity"
        meta = ev.get("meta") or {}
        v.backend, v.checkpoint = meta.get("backend"), meta.get("checkpoint")
        return True

    def run_stored(self, ev: reducer.RunStored) -> bool:
        for var in self.cv.variants:
            rid = ev.get("run_id")
            if ev.get("run") in var.run_keys and rid is not None:
                if rid not in var.run_ids:
                    var.run_ids.append(int(rid))
                return True
        return False

    def sanity(self, ev: ev_t.SanityEvent) -> bool:
        v = self._v(ev)
        if v is None:
            return False
        v.sanity = bool(ev.get("passed"))
        if v.sanity:
            v.state = "running"
        return True

    def _cell(self, ev: Any) -> Cell | None:
        v = self._v(ev)
        idx = int(ev.get("level") or 0)
        if v is None or idx >= len(v.cells):
            return None
        v.state = "running"
        return v.cells[idx]

    def level_start(self, ev: ev_t.LevelStartEvent) -> bool:
        cell = self._cell(ev)
        if cell is None:
            return False
        cell.state, cell.requests = "running", int(ev.get("requests") or cell.requests)
        cell.completed = cell.errors = 0
        return True

    def request(self, ev: ev_t.RequestEvent) -> bool:
        cell = self._cell(ev)
        if cell is None:
            return False
        if ev.get("ok"):
            cell.completed += 1
        else:
            cell.errors += 1
        return True

    def level(self, ev: ev_t.LevelEvent) -> bool:
        cell = self._cell(ev)
        if cell is None:
            return False
        cell.state = str(ev.get("status") or ("partial" if ev.get("partial") else "done"))
        cell.tok_s = ev.get("output_tok_s")
        cell.completed = int(ev.get("completed") or 0)
        cell.errors = int(ev.get("errors") or 0)
        v = self._v(ev)
        run = str(ev.get("run") or (v.run_keys[-1] if v and v.run_keys else ""))
        if v is not None and cell.tok_s is not None and cell.state in ("done", "partial"):
            v.run_tok_s.setdefault(run, {})[int(ev.get("level") or 0)] = float(cell.tok_s)
        return True

    def variant_end(self, ev: ev_t.VariantEndEvent) -> bool:
        v = self._v(ev)
        if v is None:
            return False
        v.state = str(ev.get("state") or "done")
        v.reason = ev.get("reason") or v.reason
        lines = [str(x) for x in ev.get("error_lines") or []]
        v.error_lines = lines or v.error_lines
        v.ended = self.now
        if v.started is None:
            v.started = self.now
        for cell in v.cells:
            if cell.state == "running":
                cell.state = "partial"
        return True

    def campaign_end(self, ev: ev_t.CampaignEndEvent) -> bool:
        cv = self.cv
        cv.state = str(ev.get("state") or "done")
        cv.detail = ev.get("reason")
        cv.server = (ev.get("server") or {}).get("text")
        cv.ended, cv.current = self.now, None
        return True

    def journal_torn(self, ev: ev_t.JournalTornEvent) -> bool:
        self.cv.torn += 1
        return True

    def journal_end(self, ev: ev_t.JournalEndEvent) -> bool:
        cv = self.cv
        state = str(ev.get("state") or "")
        if state in ENDED and cv.state not in ENDED:
            cv.state, cv.detail, cv.ended = state, ev.get("reason"), self.now
            for var in cv.variants:
                if var.active:
                    var.state = "interrupted" if state == "interrupted" else var.state
            return True
        return False


def from_status(info: dict[str, Any], store: Any = None) -> CampaignView:
    """A campaign view to start from when attaching to a running campaign (``campaign
    list`` / ``status`` on the host): its variants and their states, and what ``store``
    already holds of their runs; the journal's events from the stored offset fill in the
    rest. Reads the store: call it off the UI loop."""
    from dsv4tui.core.store import campaigns as cstore

    plan = info.get("plan") or {}
    levels = [(int(c), int(n)) for c, n in plan.get("levels") or []]
    cid = info.get("id")
    cv = CampaignView(state="running" if info.get("state") == "running" else
                      str(info.get("state") or "running"), id=cid, name=info.get("name"),
                      kind=str(info.get("kind") or "campaign"), host=info.get("host"),
                      levels=levels, repeats=int(info.get("repeats") or 1))
    cur = info.get("current") or {}
    cv.current = cur.get("variant") if isinstance(cur.get("variant"), int) else None
    stored = cstore.run_ids(store, str(cid)) if store is not None and cid else {}
    for v in info.get("variants") or []:
        view = VariantView(str(v.get("name")), str(v.get("label") or v.get("name")),
                           state=str(v.get("state") or "pending"), reason=v.get("reason"),
                           error_lines=[str(x) for x in v.get("error_lines") or []],
                           cells=_cells(levels), run_keys=[str(k) for k in v.get("runs") or []])
        view.run_ids = [stored[k] for k in view.run_keys if k in stored]
        if view.run_ids and store is not None:
            _cells_from_store(view, store, view.run_ids[-1])
            for key in view.run_keys:
                if key in stored:
                    view.run_tok_s[key] = {
                        lv.idx: float(lv.output_tok_s) for lv in store.levels(stored[key])
                        if lv.output_tok_s is not None and not lv.stats.get("rebuilt")}
        cv.variants.append(view)
    if store is not None:
        set_kernel_lines(cv, kernel_lines(cv, store))
    return cv


def kernel_lines(cv: CampaignView, store: Any) -> list[str | None]:
    """Each variant's kernel families line (``VariantKernels.short``) from the captures
    linked to its runs; None where it has none. Reads the store: call it off the UI loop."""
    from dsv4tui.core.campaign.variant_kernels import for_runs

    out: list[str | None] = []
    for v in cv.variants:
        runs = [r for r in (store.run(i) for i in list(v.run_ids)) if r is not None]
        found = for_runs(store, runs, v.name) if runs else None
        out.append(found.short() if found is not None else None)
    return out


def set_kernel_lines(cv: CampaignView, lines: list[str | None]) -> bool:
    """:func:`kernel_lines`' answer into the view; True when a line changed."""
    changed = False
    for v, line in zip(cv.variants, lines, strict=False):
        if line != v.kernels:
            v.kernels, changed = line, True
    return changed


def _cells_from_store(view: VariantView, store: Any, run_id: int) -> None:
    run = store.run(run_id)
    if run is not None:
        view.backend, view.checkpoint, view.sanity = run.backend, run.checkpoint, \
            run.sanity_passed
        if run.launch_id is not None:
            rows = store.query("SELECT startup_s, profile_json FROM launches WHERE id = ?",
                               (run.launch_id,))
            view.startup_s = rows[0]["startup_s"] if rows else None
            profile = _json(rows[0]["profile_json"]) if rows else None
            view.phases = phase_seconds(profile.get("phases")) if isinstance(profile, dict) \
                else {}
    by_idx = {lv.idx: lv for lv in store.levels(run_id)}
    for idx, cell in enumerate(view.cells):
        lv = by_idx.get(idx)
        if lv is not None:
            cell.state = str(lv.stats.get("status") or ("partial" if lv.partial else "done"))
            cell.tok_s = lv.output_tok_s
            cell.completed = int(lv.stats.get("completed") or 0)
            cell.errors = int(lv.stats.get("errors") or 0)
            if lv.stats.get("rebuilt"):  # the level in progress (requests stored so far)
                cell.state, cell.tok_s = "running", None


def _json(text: Any) -> Any:
    import json

    try:
        return json.loads(text) if isinstance(text, str) and text else None
    except ValueError:
        return None
