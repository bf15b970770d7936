"""The decode roofline: how fast a memory-bound decode step could possibly be (docs/roofline.md).

A decode step reads every active weight once for the whole batch, so with the weights spread
over ``gpus`` GPUs (tensor/expert parallel, each reading its share)::

    decode_step_bytes  = active_params * bytes_per_param
    step time (floor)  = decode_step_bytes / gpus / bandwidth_per_gpu
    decode_steps_per_s = gpus * bandwidth_per_gpu / decode_step_bytes
    ceiling_tok_s(C)   = C * decode_steps_per_s        (one token per running request per step)

Left out (the ceiling is an upper bound): KV-cache reads, activations and inter-GPU
communication, block-scale bytes, launch and scheduling gaps, and -- for MoE at C > 1 -- the
extra experts a batch touches (``routed`` gives that refinement when the model's expert
layout is known).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dsv4tui.core import gpu_specs
from dsv4tui.core.errors import ConfigError
from dsv4tui.core.gpu_specs import GpuSpec

DEFAULT_CONCURRENCIES = (1, 8, 16)
LEAVES_OUT = (
    "KV-cache reads (they grow with context length and batch)",
    "activations and inter-GPU communication (all-reduce, all-to-all)",
    "block-scale bytes of quantized formats (MXFP4 +1/32 B, NVFP4 +1/16 B per weight)",
    "kernel launch, scheduling and sampling gaps between steps",
    "compute limits (compute_ceiling_tok_s says where they would bind)",
)
ASSUMPTION = ("the weights are spread over the GPUs (tensor/expert parallel), each reading its "
              "share once per decode step; one token per running request per step")


class RooflineError(ConfigError):
    """Missing or bad roofline inputs (one line for the user)."""


_PARAMS_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([kmbt]?)\s*$", re.I)
_SUFFIX = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "t": 1e12}


def parse_params(text: str | float | int) -> float:
    """``13B``, ``13e9``, ``13000000000``, ``37.5b``; a bare number under 10000 is billions."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
    else:
        m = _PARAMS_RE.match(str(text))
        if not m:
            raise RooflineError(f"--active-params: {text!r} is not a parameter count "
                                "(e.g. 13B or 13e9)")
        value = float(m.group(1)) * _SUFFIX[m.group(2).lower()]
        if not m.group(2) and value < 1e4:
            value *= 1e9
    if not math.isfinite(value) or value <= 0:
        raise RooflineError(f"--active-params must be > 0 (got {text!r})")
    return value


def parse_concurrencies(text: str) -> list[int]:
    try:
        out = [int(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise RooflineError(f"--concurrency: {text!r} is not a list like 1,8,16") from None
    if not out or any(c < 1 for c in out):
        raise RooflineError("--concurrency: each C must be >= 1")
    return out


@dataclass
class MoeLayout:
    """What the routed refinement needs (from ``agent profile model-facts``)."""

    experts: int
    experts_per_token: int
    moe_layers: int
    expert_params: float  # one expert of one layer
    dense_params_per_step: float  # everything read per step except the routed experts

    @classmethod
    def from_facts(cls, facts: Mapping[str, Any] | None) -> MoeLayout | None:
        if not facts:
            return None
        try:
            e, k = int(facts["experts"]), int(facts["experts_per_token"])
            layers, expert = int(facts["moe_layers"]), float(facts["expert_params"])
            dense = float(facts["dense_params_per_step"])
        except (KeyError, TypeError, ValueError):
            return None
        if e <= 1 or k < 1 or layers < 1 or expert <= 0:
            return None
        return cls(e, k, layers, expert, dense)

    def experts_touched(self, c: int) -> float:
        """Expected distinct experts per MoE layer for C tokens routed uniformly."""
        return self.experts * (1.0 - (1.0 - self.experts_per_token / self.experts) ** c)

    def step_params(self, c: int) -> float:
        return self.dense_params_per_step + self.moe_layers * self.experts_touched(c) * \
            self.expert_params


@dataclass
class RooflineInputs:
    gpu: GpuSpec | None
    gpus: int
    active_params: float
    bytes_per_param: float
    bandwidth_tb_s: float | None = None  # override of the spec's per-GPU bandwidth
    gpu_name: str | None = None
    sources: dict[str, str] = field(default_factory=dict)
    moe: MoeLayout | None = None

    @property
    def bandwidth_bytes_s(self) -> float:
        if self.bandwidth_tb_s:
            return self.bandwidth_tb_s * 1e12
        if self.gpu is None:
            raise RooflineError("no bandwidth: unknown GPU and no --bandwidth TB/s")
        return self.gpu.bandwidth_bytes_s


def make_inputs(*, gpu: str | None, gpus: int | None, active_params: Any,
                bytes_per_param: Any, bandwidth_tb_s: float | None = None,
                sources: Mapping[str, str] | None = None,
                moe: MoeLayout | None = None) -> RooflineInputs:
    """Validate raw inputs into RooflineInputs; RooflineError names what is missing."""
    spec = gpu_specs.lookup(gpu) if gpu else None
    if spec is None and not bandwidth_tb_s:
        known = ", ".join(gpu_specs.known_names())
        if gpu:
            raise RooflineError(f"unknown GPU {gpu!r} (known: {known}); pass --bandwidth "
                                "TB/s for another one")
        raise RooflineError(f"no GPU: pass --gpu NAME ({known}) or --bandwidth TB/s")
    if bandwidth_tb_s is not None and not (bandwidth_tb_s > 0 and math.isfinite(bandwidth_tb_s)):
        raise RooflineError("--bandwidth must be > 0 TB/s")
    if gpus is None or gpus < 1:
        raise RooflineError("--gpus must be >= 1")
    if active_params is None:
        raise RooflineError("no active parameter count: pass --active-params (e.g. 13B), set "
                            "active_params_b in the server profile, or let the host's "
                            "config.json give it")
    params = parse_params(active_params)
    if bytes_per_param is None:
        raise RooflineError("no bytes per weight: pass --bytes-per-param (0.5 for FP4, 1 for "
                            "FP8, 2 for BF16) or set bytes_per_param in the server profile")
    try:
        bpp = float(bytes_per_param)
    except (TypeError, ValueError):
        raise RooflineError(f"--bytes-per-param: {bytes_per_param!r} is not a number") from None
    if not (0 < bpp <= 8 and math.isfinite(bpp)):
        raise RooflineError("--bytes-per-param must be in (0, 8]")
    return RooflineInputs(spec, int(gpus), params, bpp, bandwidth_tb_s, gpu,
                          dict(sources or {}), moe)


def _r(x: float | None, nd: int = 3) -> float | None:
    return None if x is None else round(x, nd)


def compute(inputs: RooflineInputs, concurrencies: Iterable[int] = DEFAULT_CONCURRENCIES,
            measured: Mapping[int, float | None] | None = None) -> dict[str, Any]:
    """The roofline JSON (docs/roofline.md): ceilings per C and, where measured, % of them."""
    bw = inputs.bandwidth_bytes_s
    step_bytes = inputs.active_params * inputs.bytes_per_param
    per_gpu = step_bytes / inputs.gpus
    steps_per_s = inputs.gpus * bw / step_bytes
    measured = dict(measured or {})
    cs = sorted(set(concurrencies) | {c for c, v in measured.items() if v is not None})
    spec = inputs.gpu
    tflops, precision = spec.tflops_for(inputs.bytes_per_param) if spec else (None, None)
    compute_tok_s = (inputs.gpus * tflops * 1e12 / (2.0 * inputs.active_params)
                     if tflops else None)
    levels = []
    for c in cs:
        ceiling = c * steps_per_s
        m = measured.get(c)
        level: dict[str, Any] = {
            "concurrency": c, "ceiling_tok_s": _r(ceiling, 2),
            "measured_tok_s": _r(m, 3) if m is not None else None,
            "percent_of_ceiling": _r(100.0 * m / ceiling, 4) if m is not None else None,
        }
        if compute_tok_s is not None:
            level["bound"] = "memory" if ceiling < compute_tok_s else "compute"
        if inputs.moe is not None:
            params = inputs.moe.step_params(c)
            r_bytes = params * inputs.bytes_per_param
            r_ceiling = c * inputs.gpus * bw / r_bytes
            level["routed"] = {
                "experts_touched": _r(inputs.moe.experts_touched(c), 2),
                "step_bytes": round(r_bytes), "ceiling_tok_s": _r(r_ceiling, 2),
                "percent_of_ceiling": _r(100.0 * m / r_ceiling, 4) if m is not None else None,
            }
        levels.append(level)
    return {
        "gpu": spec.name if spec else (inputs.gpu_name or "custom"),
        "gpu_key": spec.key if spec else None,
        "form_factor": spec.form_factor if spec else None,
        "gpus": inputs.gpus,
        "bandwidth_bytes_s": bw,
        "bandwidth_source": ("--bandwidth" if inputs.bandwidth_tb_s else
                             spec.source if spec else None),
        "active_params": inputs.active_params,
        "bytes_per_param": inputs.bytes_per_param,
        "decode_step_bytes": round(step_bytes),
        "bytes_per_gpu_per_step": round(per_gpu),
        "decode_step_ms": round(1000.0 / steps_per_s, 5),
        "decode_steps_per_s": round(steps_per_s, 3),
        "compute_ceiling_tok_s": _r(compute_tok_s, 1),
        "compute_precision": precision,
        "levels": levels,
        "assumes": ASSUMPTION,
        "leaves_out": list(LEAVES_OUT),
        "sources": dict(inputs.sources),
        "routed_model": (None if inputs.moe is None else {
            "experts": inputs.moe.experts, "experts_per_token": inputs.moe.experts_per_token,
            "moe_layers": inputs.moe.moe_layers,
            "note": "distinct experts a batch of C tokens touches per layer, routing uniform: "
                    "E * (1 - (1 - k/E)^C); their weights are read too"}),
    }


def measured_from_levels(levels: Iterable[Any]) -> dict[int, float]:
    """C -> output tok/s from store Levels (or level dicts); the last level at a C wins."""
    out: dict[int, float] = {}
    for lv in levels:
        if isinstance(lv, Mapping):
            c, tok_s = lv.get("concurrency"), lv.get("output_tok_s")
        else:
            c, tok_s = getattr(lv, "concurrency", None), getattr(lv, "output_tok_s", None)
        if isinstance(c, int) and isinstance(tok_s, (int, float)):
            out[c] = float(tok_s)
    return out


def inputs_for_run(run: Any, *, facts: Mapping[str, Any] | None = None,
                   gpu: str | None = None, gpus: int | None = None,
                   active_params: Any = None, bytes_per_param: Any = None,
                   bandwidth_tb_s: float | None = None) -> RooflineInputs:
    """Roofline inputs for a stored run (``dsv4tui.core.store.Run``): explicit arguments win, then
    the run's server profile (``tp_size``, ``active_params_b``, ``bytes_per_param``), then
    model ``facts`` (``agent profile model-facts``), then the GPU names the run recorded."""
    profile = getattr(run, "profile", None) or {}
    sources: dict[str, str] = {}
    names = list(getattr(run, "gpu_names", None) or [])
    if gpu is None and names:
        gpu = names[0]
        sources["gpu"] = "the run's GPU names"
    elif gpu is not None:
        sources["gpu"] = "given"
    if gpus is None:
        tp = profile.get("tp_size")
        if isinstance(tp, int) and tp > 0:
            gpus, sources["gpus"] = tp, "profile tp_size"
        elif names:
            gpus, sources["gpus"] = len(names), "the run's GPU count"
    if active_params is None and profile.get("active_params_b") is not None:
        active_params = float(profile["active_params_b"]) * 1e9
        sources["active_params"] = "profile active_params_b"
    if active_params is None and facts and facts.get("decode_read_params"):
        active_params = facts["decode_read_params"]
        sources["active_params"] = f"config.json ({facts.get('config_path', 'model facts')})"
    elif "active_params" not in sources and active_params is not None:
        sources["active_params"] = "given"
    if bytes_per_param is None and profile.get("bytes_per_param") is not None:
        bytes_per_param = profile["bytes_per_param"]
        sources["bytes_per_param"] = "profile bytes_per_param"
    if bytes_per_param is None and facts and facts.get("bytes_per_param"):
        bytes_per_param = facts["bytes_per_param"]
        sources["bytes_per_param"] = (f"{facts.get('weight_format')} "
                                      f"({facts.get('bytes_source')})")
    elif "bytes_per_param" not in sources and bytes_per_param is not None:
        sources["bytes_per_param"] = "given"
    return make_inputs(gpu=gpu, gpus=gpus, active_params=active_params,
                       bytes_per_param=bytes_per_param, bandwidth_tb_s=bandwidth_tb_s,
                       sources=sources, moe=MoeLayout.from_facts(facts))


def for_run(run: Any, levels: Sequence[Any], **kwargs: Any) -> dict[str, Any]:
    """The roofline of a stored run with its measured levels (Runs compare view).
    RooflineError when the inputs cannot be found (pass them as in ``inputs_for_run``)."""
    inputs = inputs_for_run(run, **kwargs)
    measured = measured_from_levels(levels)
    result = compute(inputs, measured.keys() or DEFAULT_CONCURRENCIES, measured)
    result["run_id"] = getattr(run, "id", None)
    return result


def percent_by_concurrency(result: Mapping[str, Any]) -> dict[int, float | None]:
    """C -> measured / ceiling in % (None where not measured): a column for a table."""
    return {lv["concurrency"]: lv.get("percent_of_ceiling") for lv in result.get("levels", [])}


# --- text ----------------------------------------------------------------------------------


def _si(value: float, unit: str) -> str:
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def format_pct(p: float | None) -> str:
    if p is None:
        return "—"
    if p == 0:
        return "0 %"
    if p < 0.1:
        return f"{p:.3f} %"
    if p < 10:
        return f"{p:.2f} %"
    return f"{p:.1f} %"


def format_text(result: Mapping[str, Any]) -> str:
    """The roofline as the CLI prints it."""
    from dsv4tui.core.text_table import table

    lines = [
        f"GPU           {result['gpu']} x {result['gpus']}"
        + (f"  ({result['form_factor']})" if result.get("form_factor") else ""),
        f"bandwidth     {_si(result['bandwidth_bytes_s'], 'B/s')} per GPU"
        + (f"  [{result['bandwidth_source']}]" if result.get("bandwidth_source") else ""),
        f"weights/step  {result['active_params'] / 1e9:.4g} B params x "
        f"{result['bytes_per_param']:g} B = {_si(result['decode_step_bytes'], 'B')}"
        f" ({_si(result['bytes_per_gpu_per_step'], 'B')} per GPU)",
        f"step floor    {result['decode_step_ms']:.4g} ms  →  "
        f"{result['decode_steps_per_s']:,.0f} decode steps/s",
    ]
    if result.get("compute_ceiling_tok_s"):
        lines.append(f"compute       {result['compute_ceiling_tok_s']:,.0f} tok/s at dense "
                     f"{result['compute_precision']} peak (where compute would bind)")
    for key, value in (result.get("sources") or {}).items():
        lines.append(f"  {key}: {value}")
    routed = result.get("routed_model") is not None
    headers = ["C", "ceiling tok/s", "measured tok/s", "% of ceiling"]
    if routed:
        headers += ["experts/layer", "routed ceiling", "% routed"]
    rows = []
    for lv in result["levels"]:
        row = [str(lv["concurrency"]), f"{lv['ceiling_tok_s']:.1f}",
               "—" if lv["measured_tok_s"] is None else f"{lv['measured_tok_s']:.2f}",
               format_pct(lv["percent_of_ceiling"])]
        if routed and lv.get("routed"):
            r = lv["routed"]
            row += [f"{r['experts_touched']:.1f}", f"{r['ceiling_tok_s']:.1f}",
                    format_pct(r["percent_of_ceiling"])]
        rows.append(row)
    lines += ["", table(rows, headers), "",
              "assumes: " + result["assumes"],
              "leaves out: " + "; ".join(result["leaves_out"])]
    return "\n".join(lines)
