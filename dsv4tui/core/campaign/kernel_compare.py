"""Where the time moved between two kernel captures (``dsv4tui kernels compare A B``).

Per family (the agent's, ``trace_parse.FAMILY_LABELS``): the share of a decode step, the GPU
time per decode step (share x the capture's mean decode-step GPU time), per token when the two
ran at different batches, and whether it ran on tensor cores; then the kernels that appeared,
vanished or moved most. Pure: it reads two stored summaries, nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dsv4tui.core.campaign.kernel_load import load_text
from dsv4tui.core.errors import EXIT_CONFIG, UserError


def _part(obj: Mapping[str, Any] | None, *keys: str) -> Mapping[str, Any]:
    for key in keys:
        obj = obj.get(key) if isinstance(obj, Mapping) else None
    return obj if isinstance(obj, Mapping) else {}


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def side(capture: Any) -> dict[str, Any]:
    """What one capture measured: its decode step, batch and load (``capture`` is a
    ``store.kernels.KernelCapture``). A capture without a parsed trace is a UserError."""
    s = capture.summary if isinstance(capture.summary, Mapping) else {}
    if not s.get("families"):
        raise UserError(f"kernel capture #{capture.id} has no parsed trace (no kernel families)",
                        EXIT_CONFIG)
    dec = _part(s, "steps", "decode")
    load = dict(capture.load or _part(s, "load"))
    batch = _num(dec.get("mean_bs")) or _num(load.get("measured_bs")) \
        or _num(capture.concurrency if capture.concurrency is not None
                else load.get("concurrency"))
    return {"id": capture.id, "title": capture.title, "run_id": capture.run_id,
            "backend": capture.backend, "checkpoint": capture.checkpoint,
            "simulated": bool(capture.simulated or _part(s, "server").get("simulated")),
            "basis": s.get("basis"), "step_ms": _num(dec.get("mean_ms")),
            "interval_ms": _num(dec.get("interval_ms")), "tok_s": _num(dec.get("tok_s")),
            "batch": batch, "load": load_text(capture.concurrency, load),
            "batch_far": bool(load.get("batch_far")), "kept_kernels": len(s.get("kernels") or []),
            "rest_kernels": int(_part(s, "kernels_rest").get("count") or 0)}


def _per(share: float | None, sd: Mapping[str, Any]) -> tuple[float | None, float | None]:
    """(ms per decode step, ms per token) of a share of ``sd``'s decode step."""
    if share is None or sd["step_ms"] is None or sd["basis"] != "decode":
        return None, None
    step = share * sd["step_ms"]
    return step, (step / sd["batch"] if sd["batch"] else None)


def _tensor_change(a: bool | None, b: bool | None) -> str:
    if a is None or b is None:
        return "tensor-core use unknown"
    if a == b:
        return "tensor cores in both" if a else "CUDA cores in both"
    return "moved to tensor cores" if b else "moved off tensor cores"


def _delta(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else b - a


def _family_row(key: str, label: str, fa: Mapping[str, Any] | None,
                fb: Mapping[str, Any] | None, sa: Mapping[str, Any],
                sb: Mapping[str, Any]) -> dict[str, Any]:
    cells: list[dict[str, Any]] = []
    for f, sd in ((fa, sa), (fb, sb)):
        share = _num(f.get("share")) if f else (0.0 if f is None else None)
        step, tok = _per(share, sd)
        cells.append({"share": share, "step_ms": step, "token_ms": tok, "calls":
                      int(f.get("calls") or 0) if f else 0,
                      "tensor_cores": f.get("tensor_cores") if f else None,
                      "present": f is not None})
    a, b = cells
    share_change = _delta(a["share"], b["share"])
    return {"family": key, "label": label, "a": a, "b": b,
            "share_change_pt": None if share_change is None else 100 * share_change,
            "step_ms_change": _delta(a["step_ms"], b["step_ms"]),
            "token_ms_change": _delta(a["token_ms"], b["token_ms"]),
            "tensor_cores": _tensor_change(a["tensor_cores"], b["tensor_cores"])
            if a["present"] and b["present"] else
            ("appeared" if b["present"] else "vanished")}


def _kernels(s: Mapping[str, Any], sd: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for k in s.get("kernels") or []:
        step, tok = _per(_num(k.get("share")), sd)
        out[str(k.get("name") or k.get("short_name"))] = {
            "name": k.get("short_name") or k.get("name"), "family": k.get("family"),
            "share": _num(k.get("share")), "step_ms": step, "token_ms": tok}
    return out


def _kernel_moves(a: Any, b: Any, sa: Mapping[str, Any], sb: Mapping[str, Any],
                  top: int) -> dict[str, list[dict[str, Any]]]:
    ka, kb = _kernels(a.summary, sa), _kernels(b.summary, sb)

    def key(x: Mapping[str, Any]) -> float:
        return x["share"] or 0.0

    appeared = sorted((kb[n] for n in kb if n not in ka), key=key, reverse=True)[:top]
    vanished = sorted((ka[n] for n in ka if n not in kb), key=key, reverse=True)[:top]
    moved: list[dict[str, Any]] = []
    for n in ka.keys() & kb.keys():
        x, y = ka[n], kb[n]
        change = _delta(x["share"], y["share"])
        moved.append({"name": x["name"], "family": x["family"], "a": x, "b": y,
                      "share_change_pt": None if change is None else 100 * change,
                      "step_ms_change": _delta(x["step_ms"], y["step_ms"])})
    moved.sort(key=lambda m: abs(m["step_ms_change"] if m["step_ms_change"] is not None
                                 else (m["share_change_pt"] or 0.0)), reverse=True)
    return {"appeared": appeared, "vanished": vanished, "moved": moved[:top]}


def compare(a: Any, b: Any, *, top: int = 5) -> dict[str, Any]:
    """Capture ``b`` against capture ``a`` (both ``KernelCapture``), JSON-ready."""
    sa, sb = side(a), side(b)
    fam_a = {f["family"]: f for f in a.summary.get("families") or []}
    fam_b = {f["family"]: f for f in b.summary.get("families") or []}
    labels = {**{k: f.get("label") or k for k, f in fam_b.items()},
              **{k: f.get("label") or k for k, f in fam_a.items()}}
    order = list(fam_a) + [k for k in fam_b if k not in fam_a]
    families = [_family_row(k, labels[k], fam_a.get(k), fam_b.get(k), sa, sb) for k in order]
    per_token = bool(sa["batch"] and sb["batch"] and abs(sa["batch"] - sb["batch"]) > 0.5)
    notes = [f"shares are of a decode step's GPU kernel time; ms per step = share x the "
             f"capture's mean decode-step GPU time ({_fmt(sa['step_ms'])} vs "
             f"{_fmt(sb['step_ms'])} ms)"]
    if per_token:
        notes.append(f"different batches (bs {sa['batch']:g} vs {sb['batch']:g}): compared per "
                     "decode step AND per token (ms per step / batch)")
    if "decode" not in (sa["basis"], sb["basis"]) or sa["basis"] != sb["basis"]:
        notes.append(f"the captures' bases differ or are not decode steps ({sa['basis']} vs "
                     f"{sb['basis']}): no ms per step")
    if sa["rest_kernels"] or sb["rest_kernels"]:
        notes.append(f"appeared/vanished means not among the other capture's "
                     f"{sa['kept_kernels']}/{sb['kept_kernels']} kept kernels")
    if sa["simulated"] or sb["simulated"]:
        notes.append("SIMULATED: " + " and ".join(
            f"#{x['id']}" for x in (sa, sb) if x["simulated"]) + " came from the simulator")
    return {"a": sa, "b": sb, "per_token": per_token, "families": families,
            "kernels": _kernel_moves(a, b, sa, sb, top), "notes": notes,
            "headline": headline(families)}


def _fmt(x: float | None, spec: str = ".1f") -> str:
    return "-" if x is None else format(x, spec)


def headline(families: list[dict[str, Any]], n: int = 3) -> list[str]:
    """The largest families in words: ``MoE GEMM moved to tensor cores: 38.9 % -> 26.9 % of
    a decode step``."""
    big = sorted(families, key=lambda f: max(f["a"]["share"] or 0, f["b"]["share"] or 0),
                 reverse=True)[:n]
    out = []
    for f in big:
        a, b = f["a"]["share"], f["b"]["share"]
        shares = f"{_fmt(None if a is None else 100 * a)} % -> " \
                 f"{_fmt(None if b is None else 100 * b)} % of a decode step"
        ms = ""
        if f["step_ms_change"] is not None:
            ms = f", {_fmt(f['a']['step_ms'])} -> {_fmt(f['b']['step_ms'])} ms per step"
        out.append(f"{f['label']} {f['tensor_cores']}: {shares}{ms}")
    return out
