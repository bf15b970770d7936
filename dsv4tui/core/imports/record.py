"""What every reader of another tool's result file hands the store: :class:`ImportedRun` (the
levels in the agent's ``level`` event shape, the per-request rows where the file has them,
the plan, what the tool knew of the server, notes), and :func:`save`, which writes it as one
run in one transaction (a file that fails anywhere leaves nothing behind)."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from dsv4tui.core.errors import EXIT_CONFIG, UserError

if TYPE_CHECKING:
    from dsv4tui.core.store.runstore import RunStore

IMPORTED_HOST = "imported"


class Imported(NamedTuple):
    """What ``runs import`` stored: the run, its levels, and the notes it made (values read
    as 0, lines without server facts)."""
    run_id: int
    levels: int
    notes: list[str]
    tool: str = "sglang bench_serving"
    version: str | None = None
    requests: int = 0


@dataclass
class ImportedRun:
    """One file read, not yet stored. ``tool``: whose file (``aiperf``, ``guidellm``, ``vllm
    bench serve``, ``sglang bench_serving``); ``definitions``: the key of its row in
    :data:`dsv4tui.core.imports.definitions.DEFINITIONS`; ``server``: the agent's
    ``describe`` fields when the file kept the server's own ``/server_info``, else None;
    ``server_args``: what the tool knew of the server otherwise (model, its URL, ...)."""
    tool: str
    version: str | None
    definitions: str
    path: str
    label: str
    levels: list[dict[str, Any]]
    requests: list[dict[str, Any]] = field(default_factory=list)
    plan: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    model: str | None = None
    url: str | None = None
    backend: str | None = None
    checkpoint: str | None = None
    server_version: str | None = None
    simulated: bool = False
    profile_name: str | None = None
    server: dict[str, Any] | None = None
    server_args: dict[str, Any] | None = None
    note: str | None = None  # the run's note; default "imported from FILE (TOOL ...)"

    @property
    def name(self) -> str:
        return os.path.basename(self.path) or self.path


def read_text(path: str) -> str:
    """The file as text; one-line UserError when it cannot be read."""
    name = os.path.basename(path) or path
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except IsADirectoryError:
        raise UserError(f"runs import: {path} is a directory (give the result file in it)",
                        EXIT_CONFIG) from None
    except OSError as exc:
        raise UserError(f"runs import: cannot read {path}: {exc.strerror}", EXIT_CONFIG) from None
    except UnicodeDecodeError:
        raise UserError(f"runs import: {name} is not UTF-8 text", EXIT_CONFIG) from None


def bad(name: str, where: str | None, what: str) -> UserError:
    """The one-line error of a file that cannot be read: ``runs import: NAME WHERE: WHAT``
    (``where``: ``line 3`` or ``key benchmarks[0].metrics``)."""
    return UserError(f"runs import: {name}{' ' + where if where else ''}: {what}", EXIT_CONFIG)


def json_lines(text: str, name: str) -> Iterator[tuple[int, Any]]:
    """(line number, value) of each non-blank line of a JSON-lines file; a line that is not
    JSON is ``bad`` naming it."""
    for no, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            yield no, json.loads(line)
        except ValueError as exc:
            raise bad(name, f"line {no}", f"not JSON ({str(exc).split(':')[0]})") from None


def number(v: Any) -> float | None:
    """A finite number (not a bool), else None."""
    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
        return float(v)
    return None


def check_measurement(name: str, where: str, key: str, v: Any) -> float | None:
    """A latency, count or rate the file gives: None when absent, a number >= 0, else a
    one-line error naming the key."""
    if v is None:
        return None
    n = number(v)
    if n is None or n < 0:
        raise bad(name, where, f"{key} must be a number >= 0 (got {str(v)[:40]})")
    return n


def summary(mean: float | None = None, p50: float | None = None, p90: float | None = None,
            p99: float | None = None) -> dict[str, float | None]:
    return {"mean": mean, "p50": p50, "p90": p90, "p99": p99}


def level(idx: int, *, concurrency: int, requests: int, completed: int, errors: int,
          duration_s: float | None, rate: float | None = None,
          max_concurrency: int | None = None, **numbers: Any) -> dict[str, Any]:
    """A level's stats in the agent's ``level`` event shape, the keys a reader does not know
    left empty; ``numbers``: output_tokens, output_tok_s, request_throughput, input_tokens,
    total_tok_s, concurrency_mean, ttft_ms, tpot_ms, itl_ms, e2e_ms (summaries), imported."""
    out: dict[str, Any] = {
        "level": idx, "concurrency": concurrency, "requests": requests, "completed": completed,
        "errors": errors, "errors_by_kind": {"imported": errors} if errors else {},
        "not_run": max(requests - completed - errors, 0), "short_outputs": 0,
        "short_min_tokens": None, "duration_s": duration_s, "output_tokens": None,
        "output_tok_s": None, "per_request_tok_s_mean": None, "request_throughput": None,
        "input_tokens": None, "total_tok_s": None, "concurrency_mean": None,
        "token_count_source": "imported", "rate": rate,
        "kind": "closed" if rate is None else "rate",
        "max_concurrency": max_concurrency if rate is not None else None,
        "status": "done" if not errors else "partial", "partial": False, "reason": None,
        "failure": None, "busy": False}
    for key in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "ttfat_ms"):
        out[key] = summary()
    out.update(numbers)
    inputs = out.get("input_tokens")
    out["input_tokens_mean"] = (round(inputs / completed, 2) if isinstance(inputs, (int, float))
                                and inputs and completed else None)
    return out


def request(level_idx: int, index: int, *, ok: bool, start_s: float | None,
            ttft_s: float | None, e2e_s: float | None, output_tokens: int | None,
            prompt_tokens: int | None, token_source: str, chunk_gaps_ms: Sequence[float] = (),
            error: str | None = None) -> dict[str, Any]:
    """One request row in the agent's ``request`` event shape (what the store keeps)."""
    n = int(output_tokens or 0)
    tpot = ((e2e_s - ttft_s) / (n - 1) if e2e_s is not None and ttft_s is not None and n >= 2
            else None)
    return {"level": level_idx, "index": index, "ok": ok, "start_s": start_s, "ttft_s": ttft_s,
            "ttfat_s": None, "e2e_s": e2e_s, "tpot_s": tpot, "output_tokens": output_tokens,
            "prompt_tokens": prompt_tokens, "token_source": token_source,
            "chunks": len(chunk_gaps_ms) + 1 if chunk_gaps_ms else (1 if ok else 0),
            "chunk_gaps_ms": [round(float(g), 3) for g in chunk_gaps_ms],
            "finish_reason": None, "status": None,
            "error_kind": None if ok else "imported", "error": error}


def save(store: RunStore, run: ImportedRun, label: str | None = None) -> Imported:
    """Store ``run`` as one run, marked imported (host ``imported``, the tool and its version
    in the plan's ``imported``), its server facts source ``imported``: every row in one
    transaction, so a failure stores nothing."""
    from dsv4tui.core.store import campaigns, sql

    store.require_writable()
    imported = run.plan.setdefault("imported", {})
    imported.update({"source": run.tool, "tool": run.tool, "version": run.version,
                     "definitions_of": run.definitions})
    imported.setdefault("file", os.path.abspath(run.path))
    imported.setdefault("notes", run.notes)
    note = run.note or (f"imported from {run.name} ({run.tool}"
                        f"{' ' + run.version if run.version else ''}; its definitions: "
                        "docs/metrics.md)")
    with store.transaction():
        run_id = store.start_run(label=str(label or run.label), host=IMPORTED_HOST,
                                 url=run.url, model=run.model, plan=run.plan,
                                 profile_name=run.profile_name or run.tool,
                                 simulated=run.simulated, backend=run.backend,
                                 checkpoint=run.checkpoint, server_version=run.server_version)
        if run.server:  # the same columns a sweep's server facts go to (campaigns.add_run)
            campaigns.set_run_meta(store, run_id, meta_source=run.server.get("source")
                                   or "imported",
                                   server_args_json=sql.dumps(run.server.get("server_args")),
                                   quantization=run.server.get("quantization"),
                                   attention_backend=run.server.get("attention_backend"))
        elif run.server_args:
            campaigns.set_run_meta(store, run_id, meta_source="imported",
                                   server_args_json=sql.dumps(run.server_args))
        for lv in run.levels:
            store.add_level(run_id, lv)
        for req in run.requests:
            store.add_request(run_id, req)
        store.finish_run(run_id, "done" if all(lv.get("status") == "done" for lv in run.levels)
                         else "partial")
        store.update_run(run_id, error="; ".join([note, *run.notes]))
    return Imported(run_id, len(run.levels), list(run.notes), run.tool, run.version,
                    len(run.requests))


def dig(obj: Any, *path: str | int) -> Any:
    """``obj[path[0]][path[1]]...``, None where a step is missing or of the wrong type."""
    cur = obj
    for part in path:
        if isinstance(part, int):
            if not isinstance(cur, list) or not -len(cur) <= part < len(cur):
                return None
            cur = cur[part]
        elif not isinstance(cur, Mapping):
            return None
        else:
            cur = cur.get(part)
    return cur
