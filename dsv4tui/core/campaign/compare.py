"""Stored runs side by side, per concurrency: written once for ``dsv4tui runs compare``, the
dashboard's compare view and both exports.

:func:`compare_runs` reads the store (runs, their levels, the roofline % where the run has
the facts for it); a :class:`Comparison` then answers everything else without the store:
the % change of each number against the chosen baseline run (:meth:`Comparison.change`),
another baseline (:meth:`Comparison.with_baseline`), the rows of the table
(:meth:`Comparison.rows`) and its JSON (:meth:`Comparison.to_json`).

Statistics: TTFT and TPOT are p50 / p99 of the level's requests (docs/metrics.md); goodput
the share of a level's requests that met every target of the run's ``--goodput``; tensor is
the mean tensor-pipe activity over the GPUs during the level; power the sum over GPUs of the
mean power during the level; a run that measured a load twice counts its last level.

A row is one load: a closed-loop C (``rate`` None), or an open-loop request rate (``rate``
set; ``concurrency`` is its max_concurrency cap, 0 without one). :meth:`Comparison.loads`
lists them (C levels first); :meth:`Comparison.concurrencies` only the closed-loop Cs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from dsv4tui.core.campaign.columns import COMPARE_COLUMNS, Column
from dsv4tui.core.errors import EXIT_CONFIG, UserError

if TYPE_CHECKING:
    from dsv4tui.core.store.models import Level, Run
    from dsv4tui.core.store.runstore import RunStore

CHANGE_KEYS = tuple(c.key for c in COMPARE_COLUMNS if c.change)
SIMULATED = "SIMULATED"  # the mark of a number the built-in simulator served, wherever it goes


def sim_name(name: str, simulated: bool, *, short: bool = False) -> str:
    """A run's name as tables, legends and exports show it: ``label (SIMULATED)`` when the
    simulator served the run, so its numbers never pass for a real server's; ``short``:
    ``label SIM`` (a legend in a terminal, beside a title that says SIMULATED)."""
    if not simulated:
        return name
    return f"{name} SIM" if short else f"{name} ({SIMULATED})"


@dataclass(frozen=True)
class RunInfo:
    """What the comparison says about a run besides its numbers."""

    id: int
    label: str
    host: str = ""
    target: str = ""
    backend: str | None = None
    checkpoint: str | None = None
    status: str = "done"
    started_at: float | None = None
    simulated: bool = False
    sanity_passed: bool | None = None
    plan: Mapping[str, Any] | None = None  # the sweep plan it ran (the workload)
    server: Mapping[str, Any] | None = None  # what the server said it ran (run_server_facts)
    canary: Mapping[str, Any] | None = None  # its accuracy canary (store.campaigns.canaries)

    @classmethod
    def of(cls, run: Run) -> RunInfo:
        return cls(id=run.id, label=run.label, host=run.host, target=run.target,
                   backend=run.backend, checkpoint=run.checkpoint, status=run.status,
                   started_at=run.started_at, simulated=run.simulated,
                   sanity_passed=run.sanity_passed, plan=run.plan)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "label": self.label, "host": self.host, "target": self.target,
                "backend": self.backend, "checkpoint": self.checkpoint, "status": self.status,
                "started_at": self.started_at, "simulated": self.simulated,
                "sanity_passed": self.sanity_passed}


Load = tuple[int, "float | None"]  # (C, None) closed loop; (cap or 0, rate) open loop


def load_text(load: Load) -> str:
    """``C=8``, ``4 req/s`` or ``4 req/s C<=16``."""
    c, rate = load
    if rate is None:
        return f"C={c}"
    return f"{rate:g} req/s" + (f" C<={c}" if c else "")


def _load_order(load: Load) -> tuple[int, float, int]:
    c, rate = load
    return (0, float(c), 0) if rate is None else (1, rate, c)


@dataclass(frozen=True)
class Point:
    """One run's level at one C."""

    concurrency: int
    output_tok_s: float | None
    ttft_p50_ms: float | None = None
    ttft_p99_ms: float | None = None
    tpot_p50_ms: float | None = None
    tensor_active: float | None = None  # mean % over GPUs during the level
    power_w: float | None = None  # sum over GPUs of the mean power during the level
    errors: int = 0
    partial: bool = False
    roofline_pct: float | None = None  # output tok/s as % of the memory-bound ceiling
    ttft_mean_ms: float | None = None
    requests: int | None = None  # n of the level
    input_tokens_mean: float | None = None  # prompt tokens per request (the server's usage)
    rate: float | None = None  # an open-loop level's offered request rate (req/s)
    goodput_pct: float | None = None  # % of the level's requests meeting every target

    @property
    def key(self) -> Load:
        return (self.concurrency, self.rate)

    @property
    def tok_s_per_kw(self) -> float | None:
        if self.output_tok_s is None or not self.power_w:
            return None
        return self.output_tok_s / (self.power_w / 1000.0)

    def get(self, key: str) -> float | None:
        value = getattr(self, key)
        return None if value is None else float(value)

    @classmethod
    def of(cls, level: Level, roofline_pct: float | None = None) -> Point:
        s = level.stats
        ttft, tpot = s.get("ttft_ms") or {}, s.get("tpot_ms") or {}
        good = s.get("goodput") if isinstance(s.get("goodput"), Mapping) else {}
        share = good.get("share")  # type: ignore[union-attr]
        rate = s.get("rate")
        return cls(concurrency=level.concurrency, output_tok_s=level.output_tok_s,
                   rate=float(rate) if isinstance(rate, (int, float)) and rate > 0 else None,
                   goodput_pct=(100.0 * share if isinstance(share, (int, float)) else None),
                   ttft_p50_ms=ttft.get("p50"), ttft_p99_ms=ttft.get("p99"),
                   ttft_mean_ms=ttft.get("mean"), tpot_p50_ms=tpot.get("p50"),
                   tensor_active=level.tensor_mean, power_w=level.power_w,
                   errors=int(s.get("errors") or 0), partial=level.partial,
                   roofline_pct=roofline_pct, requests=level.requests,
                   input_tokens_mean=s.get("input_tokens_mean"))


def pct_change(value: float | None, base: float | None) -> float | None:
    """``value`` against ``base`` in % (None when either is missing or the base is 0)."""
    if value is None or base is None or base == 0:
        return None
    return 100.0 * (value - base) / base


@dataclass(frozen=True)
class CompareRow:
    """One run at one C: its numbers and their change against the baseline."""

    concurrency: int
    run: RunInfo
    name: str  # the label, with the id when two runs share it
    point: Point | None
    is_baseline: bool
    values: dict[str, float | None]
    changes: dict[str, float | None]  # CHANGE_KEYS -> % (0.0 for the baseline itself)
    rate: float | None = None  # an open-loop row's request rate

    @property
    def load(self) -> str:
        return load_text((self.concurrency, self.rate))


@dataclass
class Comparison:
    runs: list[RunInfo] = field(default_factory=list)
    points: dict[int, dict[Load, Point]] = field(default_factory=dict)  # run id -> load -> point
    baseline: int | None = None  # a run id; None: the first run

    @classmethod
    def build(cls, runs: Sequence[RunInfo], points: Mapping[int, Iterable[Point]],
              baseline: int | None = None) -> Comparison:
        by_run = {}
        for run in runs:
            by_c: dict[Load, Point] = {}
            for p in points.get(run.id, ()):
                by_c[p.key] = p  # the last level at a load wins
            by_run[run.id] = by_c
        cmp = cls(list(runs), by_run)
        return cmp.with_baseline(baseline)

    @property
    def baseline_id(self) -> int | None:
        ids = [r.id for r in self.runs]
        if self.baseline in ids:
            return self.baseline
        return ids[0] if ids else None

    @property
    def baseline_run(self) -> RunInfo | None:
        return next((r for r in self.runs if r.id == self.baseline_id), None)

    def with_baseline(self, run_id: int | None) -> Comparison:
        """The same comparison against another baseline run (None: the first)."""
        if run_id is not None and run_id not in {r.id for r in self.runs}:
            raise UserError(f"baseline #{run_id} is not one of the compared runs "
                            f"({', '.join(f'#{r.id}' for r in self.runs)})", EXIT_CONFIG)
        return replace(self, baseline=run_id if run_id is not None else self.baseline_id)

    @property
    def simulated_ids(self) -> list[int]:
        """The runs the built-in simulator served (their numbers are not a real server's)."""
        return [r.id for r in self.runs if r.simulated]

    def simulated_note(self) -> str | None:
        """The title mark of a comparison with a simulated run in it (None: none is)."""
        ids = self.simulated_ids
        if not ids:
            return None
        which = "every run" if len(ids) == len(self.runs) else ", ".join(f"#{i}" for i in ids)
        return f"{SIMULATED}: {which} measured the built-in simulator, not a real server"

    def concurrencies(self) -> list[int]:
        """The closed-loop Cs of the comparison (charts; rate levels: :meth:`loads`)."""
        return sorted({c for by_c in self.points.values() for c, rate in by_c if rate is None})

    def loads(self) -> list[Load]:
        """Every load of the comparison: the Cs, then the request rates."""
        return sorted({k for by_c in self.points.values() for k in by_c}, key=_load_order)

    def differences(self) -> list[str]:
        """How the runs' workloads differ (prompt and output lengths, requests per C, ...):
        a % change between different workloads says little, so the faces say so."""
        out = []
        for key, what in (("input_len", "prompt length (input_len)"),
                          ("output_len", "output length (output_len)"),
                          ("ignore_eos", "ignore_eos"), ("endpoint", "endpoint"),
                          ("temperature", "temperature")):
            # an imported run's file does not say these: unknown is not a difference
            vals = {r.id: (r.plan or {}).get(key) for r in self.runs
                    if not ((r.plan or {}).get("imported") and (r.plan or {}).get(key) is None)}
            if len({repr(v) for v in vals.values()}) > 1:
                out.append(f"{what} differs: " + ", ".join(
                    f"#{i} {v if v is not None else '?'}" for i, v in vals.items()))
        goods = {r.id: (r.plan or {}).get("goodput") for r in self.runs}
        if any(goods.values()) and len({repr(v) for v in goods.values()}) > 1:
            out.append("goodput targets differ: " + ", ".join(
                f"#{i} {_targets(v)}" for i, v in goods.items()))
        for load in self.loads():
            c, rate = load
            where = load_text(load)
            ns = {r.id: p.requests for r in self.runs
                  if (p := self.point(r.id, c, rate)) is not None and p.requests is not None}
            if len(set(ns.values())) > 1:
                out.append(f"{where}: requests per level differ: "
                           + ", ".join(f"#{i} n={n}" for i, n in ns.items()))
            toks = {r.id: p.input_tokens_mean for r in self.runs
                    if (p := self.point(r.id, c, rate)) is not None and p.input_tokens_mean}
            if toks and max(toks.values()) > 1.1 * min(toks.values()):
                out.append(f"{where}: prompt tokens per request differ: " + ", ".join(
                    f"#{i} {v:.0f}" for i, v in toks.items()))
        return out

    def definitions(self) -> dict[int, dict[str, Any]]:
        """Per run: whose definitions its numbers follow (ours, or the tool it was imported
        from, with its version) and what each compared column means there
        (docs/metrics.md; :mod:`dsv4tui.core.imports.definitions`)."""
        from dsv4tui.core.imports import definitions as defs

        out: dict[int, dict[str, Any]] = {}
        for r in self.runs:
            d = defs.definitions_of(r.plan)
            imported = (r.plan or {}).get("imported")
            version = imported.get("version") if isinstance(imported, Mapping) else None
            out[r.id] = {"tool": d.tool, "version": version,
                         "columns": {col: d.get(metric).text
                                     for col, metric in defs.COLUMN_METRICS},
                         "output_tokens": d.output_tokens.text}
        return out

    def definition_differences(self) -> list[str]:
        """Where the compared runs' numbers follow different definitions (TTFT from the
        first chunk or the first token, tokens from usage or a tokenizer, ...): a % change
        across them mixes the definitions with the servers."""
        from dsv4tui.core.imports import definitions as defs

        return defs.mixed({r.id: r.plan for r in self.runs})

    def definition_notes(self) -> list[str]:
        """What the faces print under the table when a compared run is another tool's:
        ``#2 aiperf 0.13.0: TTFT = ...; TPOT = ...; tokens = ...; tok/s = ...`` per run, then
        ``warning: the columns mix definitions: ...`` per metric; [] for our runs only."""
        defs = self.definitions()
        if all(d["tool"] == "dsv4tui" for d in defs.values()):
            return []
        lines = []
        for run_id, d in defs.items():
            cols = d["columns"]
            lines.append(f"#{run_id} {d['tool']}{' ' + d['version'] if d['version'] else ''}: "
                         f"TTFT = {cols['ttft_p50_ms']}; TPOT = {cols['tpot_p50_ms']}; "
                         f"tokens = {d['output_tokens']}; tok/s = {cols['output_tok_s']}")
        lines += [f"warning: the columns mix definitions: {diff}"
                  for diff in self.definition_differences()]
        return lines

    def server_args_differences(self, limit: int = 12) -> list[str]:
        """How the servers the runs measured differ: the SGLang version, GPUs, driver and
        every server argument SGLang reported (runs without them say so)."""
        return server_args_differences({r.id: r.server for r in self.runs}, limit)

    def point(self, run_id: int, concurrency: int, rate: float | None = None) -> Point | None:
        """One run's level at C (``rate``: the open-loop level at that rate and cap)."""
        return self.points.get(run_id, {}).get((concurrency, rate))

    def change(self, run_id: int, concurrency: int, key: str, rate: float | None = None
               ) -> float | None:
        """% change of ``key`` at C (or rate) against the baseline run's."""
        p = self.point(run_id, concurrency, rate)
        base_id = self.baseline_id
        b = self.point(base_id, concurrency, rate) if base_id is not None else None
        if p is None or b is None:
            return None
        return pct_change(p.get(key), b.get(key))

    def name(self, run_id: int) -> str:
        labels = [r.label for r in self.runs]
        run = next(r for r in self.runs if r.id == run_id)
        return run.label if labels.count(run.label) == 1 else f"{run.label} #{run.id}"

    def series(self, run_id: int, key: str) -> list[float | None]:
        """``key`` of one run at every C of the comparison (charts)."""
        out = []
        for c in self.concurrencies():
            p = self.point(run_id, c)
            out.append(None if p is None else p.get(key))
        return out

    def columns(self) -> tuple[Column, ...]:
        """The compare columns a table shows: every one, less the optional ones no run has a
        value for (goodput without --goodput targets). Exports keep them all."""
        rows = self.rows()
        return tuple(c for c in COMPARE_COLUMNS if not c.optional
                     or any(r.values.get(c.key) is not None for r in rows))

    def rows(self) -> list[CompareRow]:
        """Per load (the Cs, then the rates), per run (in the order given)."""
        out = []
        base_id = self.baseline_id
        for c, rate in self.loads():
            for run in self.runs:
                p = self.point(run.id, c, rate)
                values = {col.key: (None if p is None else p.get(col.key))
                          for col in COMPARE_COLUMNS}
                changes = {k: self.change(run.id, c, k, rate) for k in CHANGE_KEYS}
                out.append(CompareRow(c, run, self.name(run.id), p, run.id == base_id,
                                      values, changes, rate))
        return out

    def verdicts(self) -> list[Any]:
        """Each label (a variant; runs sharing a label are its repeats) against the baseline
        run's label at each load: :class:`dsv4tui.core.campaign.verdict.VerdictRow`."""
        from dsv4tui.core.campaign.verdict import group_verdicts

        base = self.baseline_run
        if base is None:
            return []
        groups: dict[str, list[tuple[int, Any]]] = {}
        for run in self.runs:
            groups.setdefault(run.label, []).append((run.id, self.points.get(run.id, {})))
        if len(groups) < 2:
            return []
        return group_verdicts(list(groups.items()), base.label, self.loads())

    def canary_verdicts(self) -> list[Any]:
        """Each label's accuracy canary against the baseline label's:
        :class:`dsv4tui.core.campaign.verdict.CanaryRow`."""
        from dsv4tui.core.campaign.verdict import canary_rows

        base = self.baseline_run
        if base is None:
            return []
        by_label: dict[str, tuple[int, Mapping[str, Any]]] = {}
        for run in self.runs:
            if run.canary and run.canary.get("total") and run.label not in by_label:
                by_label[run.label] = (run.id, run.canary)
        return canary_rows(list(by_label.items()), base.label)

    def to_json(self) -> dict[str, Any]:
        """``{"baseline": id, "simulated": any run simulated, "runs": [...], "rows":
        [{"concurrency", "run_id", "simulated", "is_baseline", <numbers>, "<key>_change_pct"
        ...}]}``: numbers as numbers, None as null."""
        rows = []
        for row in self.rows():
            d: dict[str, Any] = {"concurrency": row.concurrency, "rate": row.rate,
                                 "run_id": row.run.id, "simulated": row.run.simulated,
                                 "is_baseline": row.is_baseline,
                                 "measured": row.point is not None}
            d.update({k: _round(v, 3) for k, v in row.values.items()})
            d["power_w"] = _round(row.point.power_w if row.point else None, 1)
            d["errors"] = row.point.errors if row.point else None
            d["partial"] = row.point.partial if row.point else None
            d.update({f"{k}_change_pct": _round(v, 2) for k, v in row.changes.items()})
            rows.append(d)
        return {"baseline": self.baseline_id, "simulated": bool(self.simulated_ids),
                "runs": [r.to_dict() for r in self.runs],
                "differences": self.differences(),
                "server_args_differences": self.server_args_differences(limit=200),
                "definitions": {str(i): d for i, d in self.definitions().items()},
                "definition_differences": self.definition_differences(),
                "rows": rows, "verdicts": [v.to_json() for v in self.verdicts()],
                "canary": [c.to_json() for c in self.canary_verdicts()]}


def _targets(v: Any) -> str:
    if not isinstance(v, Mapping) or not v:
        return "none"
    return ",".join(f"{k.removesuffix('_ms')}:{ms:g}" for k, ms in sorted(v.items()))


def _round(v: float | None, digits: int) -> float | None:
    return None if v is None else round(v, digits)


def roofline_pct(store: RunStore, run: Run, levels: list[Level]) -> dict[int, float | None]:
    """Measured tok/s as % of the memory-bound ceiling per C; empty when the run lacks the
    facts (GPU, active parameters) the roofline needs."""
    from dsv4tui.core import roofline

    if run.profile is None and run.launch_id is not None:
        # a sweep's run keeps no profile of its own: its server's launch has it (tp_size,
        # active_params_b, bytes_per_param), as `dsv4tui roofline HOST --run ID` reads them
        launch = store.launch(run.launch_id)
        if launch is not None and launch.profile:
            run = replace(run, profile=launch.profile)
    try:
        return roofline.percent_by_concurrency(roofline.for_run(run, levels))
    except UserError:
        return {}


def compare_runs(store: RunStore, refs: Sequence[str | int],
                 baseline: str | int | None = None) -> Comparison:
    """Runs by id or label (each once, in the order given), against ``baseline`` (a run id or
    label among them; default the first)."""
    runs: list[Run] = []
    for ref in refs:
        run = store.find_run(ref)
        if all(r.id != run.id for r in runs):
            runs.append(run)
    points: dict[int, list[Point]] = {}
    for run in runs:
        levels = store.levels(run.id)
        ceiling = roofline_pct(store, run, levels)
        points[run.id] = [Point.of(lv, ceiling.get(lv.concurrency)) for lv in levels]
    base_id = None if baseline is None else store.find_run(baseline).id
    facts = run_server_facts(store, [r.id for r in runs])
    from dsv4tui.core.store.campaigns import canaries

    canary = canaries(store, [r.id for r in runs])
    return Comparison.build([replace(RunInfo.of(r), server=facts.get(r.id),
                                     canary=canary.get(r.id)) for r in runs], points, base_id)


# -- what the server of a run said it ran ------------------------------------------------------

# Server args that differ between two launches of the same flags (or are not flags at all).
SERVER_ARGS_IGNORED = frozenset({"launch_command", "random_seed", "nccl_port", "startup_time",
                                 "internal_states", "status", "kv_events", "simulated"})
_HOST_LABELS = (("gpus", "GPUs"), ("driver", "driver"),
                ("cuda_driver_version", "CUDA driver"), ("compute_capability", "compute capability"))


def run_server_facts(store: RunStore, run_ids: Sequence[int]) -> dict[int, dict[str, Any]]:
    """Per run: ``{"args": the server args SGLang reported, "host": the GPUs and driver,
    "sglang_version", "gpu_names"}`` (from the store's runs table; {} parts when not
    recorded: runs from before they were, or a server that did not say)."""
    import json

    if not run_ids:
        return {}
    marks = ",".join("?" for _ in run_ids)
    rows = store.query(f"SELECT id, server_args_json, server_version, gpu_names_json FROM runs "
                       f"WHERE id IN ({marks})", list(run_ids))
    out: dict[int, dict[str, Any]] = {}
    for row in rows:
        try:
            args = json.loads(row["server_args_json"]) if row["server_args_json"] else None
        except ValueError:
            args = None
        try:
            gpus = json.loads(row["gpu_names_json"]) if row["gpu_names_json"] else []
        except ValueError:
            gpus = []
        args = dict(args) if isinstance(args, dict) else {}
        host = args.pop("_host", None)
        out[int(row["id"])] = {"args": args, "host": host if isinstance(host, dict) else {},
                               "sglang_version": row["server_version"],
                               "gpu_names": gpus if isinstance(gpus, list) else []}
    return out


def _shown(value: Any) -> str:
    import json

    if value is None:
        return "-"
    text = json.dumps(value, sort_keys=True) if isinstance(value, (dict, list)) else str(value)
    return text if len(text) <= 60 else text[:57] + "..."


def gpus_text(names: Any, cap: Any = None) -> str | None:
    if not names:
        return None
    names = [str(n) for n in names]
    kinds = sorted(set(names))
    text = ", ".join(f"{names.count(k)} x {k}" for k in kinds)
    if cap:
        from dsv4tui.core.server.sglang_choices import sm_name

        text += f" ({sm_name(str(cap)) or cap})"
    return text


def server_args_differences(facts: Mapping[int, Mapping[str, Any] | None],
                            limit: int = 12) -> list[str]:
    """``["moe_runner_backend: #3 triton, #4 marlin", ...]`` for the runs ``facts`` (run id
    -> :func:`run_server_facts` entry) whose values differ; first the SGLang version, GPUs
    and driver, then the server args in name order; the last line says how many more."""
    ids = list(facts)
    if len(ids) < 2:
        return []
    lines: list[str] = []

    def differ(label: str, values: dict[int, Any]) -> None:
        values = {i: v for i, v in values.items() if v is not None}  # unknown is no difference
        if len({repr(v) for v in values.values()}) > 1:
            lines.append(f"{label}: " + ", ".join(f"#{i} {_shown(v)}" for i, v in values.items()))

    empty: dict[str, Any] = {}
    entry = {i: (facts[i] or empty) for i in ids}
    differ("SGLang version", {i: entry[i].get("sglang_version") for i in ids})
    host = {i: entry[i].get("host") or empty for i in ids}
    differ("GPUs", {i: gpus_text(host[i].get("gpus") or entry[i].get("gpu_names"),
                                  host[i].get("compute_capability")) for i in ids})
    for key, label in _HOST_LABELS[1:3]:
        differ(label, {i: host[i].get(key) for i in ids})
    args = {i: entry[i].get("args") or empty for i in ids}
    missing = [i for i in ids if not args[i]]
    if missing and len(missing) < len(ids):
        lines.append("no server facts for " + ", ".join(f"#{i}" for i in missing)
                     + " (the server did not report them, an older run, or an imported one)")
    have = [i for i in ids if args[i]]
    if len(have) >= 2:
        keys = sorted({k for i in have for k in args[i]} - SERVER_ARGS_IGNORED)
        for key in keys:
            differ(key, {i: args[i].get(key) for i in have})
    if len(lines) > limit:
        lines = [*lines[:limit - 1], f"... and {len(lines) - limit + 1} more differences"]
    return lines


def campaign_comparison(store: RunStore, info: Mapping[str, Any],
                        baseline: int = 0) -> Comparison | None:
    """A campaign's runs compared (those with a finished level or a canary), against the
    ``baseline`` variant's first such run (default the first variant): None when there is
    nothing to compare."""
    from dsv4tui.core.store.campaigns import canaries

    variants = list(info.get("variants") or [])
    ids = [rid for v in variants for rid in v.get("run_ids") or []]
    if len(variants) < 2 or not ids:
        return None
    base_ids = (variants[baseline].get("run_ids") or []) if baseline < len(variants) else []
    canary = canaries(store, ids)
    kept = [rid for rid in ids if rid in canary or store.levels(rid)]
    base = next((rid for rid in base_ids if rid in kept), None)
    if base is None or len(kept) < 2:
        return None
    return compare_runs(store, kept, base)


def campaign_verdicts(store: RunStore, info: Mapping[str, Any],
                      baseline: int = 0) -> list[Any]:
    """A campaign's verdicts: each variant's repeats against the ``baseline`` variant's
    (default the first), per level (``verdict.VerdictRow``)."""
    cmp = campaign_comparison(store, info, baseline)
    return cmp.verdicts() if cmp is not None else []
