"""Where the time moved between two kernel captures, drawn: the model of
:func:`dsv4tui.core.campaign.kernel_compare.compare` (rendered here, never recomputed).

Each capture's batch, load and decode step; the families side by side (share of a decode
step, GPU ms per decode step, per token when the batches differ, tensor cores in A and B and
the change, a family that moved onto tensor cores marked ``▲``, off them ``▼``); the largest
families in words; the top kernels that appeared, vanished or moved most; the model's notes.
Columns that do not fit the width are left out whole, lowest priority first, and named.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from textual.widgets import Static

from dsv4tui.tui.widgets.text import esc, update_static

GAP = 2  # cells between column groups
TC_FLAG = {True: "TC", False: "CC", None: "?"}
# the change of tensor-core use: (long text, short text, style)
TC_CHANGE = {
    "moved to tensor cores": ("▲ moved to tensor cores", "▲ to TC", "b $success"),
    "moved off tensor cores": ("▼ moved off tensor cores", "▼ off TC", "b $warning"),
    "tensor cores in both": ("tensor cores in both", "TC both", ""),
    "CUDA cores in both": ("CUDA cores in both", "CC both", ""),
    "tensor-core use unknown": ("tensor-core use unknown", "unknown", "$foreground-muted"),
    "appeared": ("only in B", "only B", "$foreground-muted"),
    "vanished": ("only in A", "only A", "$foreground-muted"),
}


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f} %"


def _ms(x: float | None, spec: str = ".1f") -> str:
    return "-" if x is None else format(x, spec)


def _signed(x: float | None, spec: str, unit: str = "") -> str:
    if x is None:
        return "-"
    text = f"{x:{spec}}"
    if text.lstrip("+-").strip("0.") == "":  # -0.0: no change at this precision
        text = f"{0.0:{spec}}"
    return text + unit


@dataclass
class Group:
    """Columns drawn together under one heading (``share of a decode step``: A, B, change)."""

    key: str
    title: str
    headers: list[str]
    cells: list[list[str]]  # per family row, one cell per header
    styles: list[list[str]] | None = None  # per family row, a markup style per cell
    left: bool = False  # left-aligned (text), else right-aligned (numbers)

    def widths(self) -> list[int]:
        return [max([len(h)] + [len(row[i]) for row in self.cells])
                for i, h in enumerate(self.headers)]

    def width(self) -> int:
        w = self.widths()
        return max(sum(w) + 2 * (len(w) - 1), len(self.title))


def _groups(result: Mapping[str, Any], short_tc: bool) -> list[Group]:
    fams: Sequence[Mapping[str, Any]] = result["families"]
    family = Group("family", "", ["family"], [[str(f["label"])] for f in fams], left=True)
    share = Group("share", "share of a decode step", ["A", "B", "change"],
                  [[_pct(f["a"]["share"]), _pct(f["b"]["share"]),
                    _signed(f["share_change_pt"], "+.1f", " pt")] for f in fams])
    step = Group("step", "GPU ms per decode step", ["A", "B", "change"],
                 [[_ms(f["a"]["step_ms"]), _ms(f["b"]["step_ms"]),
                   _signed(f["step_ms_change"], "+.1f")] for f in fams])
    token = Group("token", "GPU ms per token", ["A", "B", "change"],
                  [[_ms(f["a"]["token_ms"], ".3f"), _ms(f["b"]["token_ms"], ".3f"),
                    _signed(f["token_ms_change"], "+.3f")] for f in fams])
    cores_cells, cores_styles = [], []
    for f in fams:
        long, short, style = TC_CHANGE.get(f["tensor_cores"], (f["tensor_cores"],) * 2 + ("",))
        cores_cells.append([TC_FLAG[f["a"]["tensor_cores"]] if f["a"]["present"] else "-",
                            TC_FLAG[f["b"]["tensor_cores"]] if f["b"]["present"] else "-",
                            short if short_tc else long])
        cores_styles.append([style, style, style])
    cores = Group("cores", "tensor cores", ["A", "B", "change"], cores_cells, cores_styles,
                  left=True)
    groups = [family, share, step]
    if result["per_token"]:
        groups.append(token)
    return [*groups, cores]


# what is left out first when the width is short (the family and its shares stay)
DROP_ORDER = ("token", "step")
DROP_ORDER_PER_TOKEN = ("step", "token")  # different batches: per token is the fair figure
GROUP_NAMES = {"token": "ms per token", "step": "ms per step"}


def fit_groups(result: Mapping[str, Any], width: int) -> tuple[list[Group], list[str]]:
    """The column groups that fit ``width`` cells, and the names of those left out."""
    for short_tc in (False, True):
        groups = _groups(result, short_tc)
        dropped: list[str] = []
        order = DROP_ORDER_PER_TOKEN if result["per_token"] else DROP_ORDER
        for key in ("", *order):
            if key:
                groups = [g for g in groups if g.key != key]
                dropped.append(GROUP_NAMES[key])
            if sum(g.width() for g in groups) + GAP * (len(groups) - 1) <= width:
                if not dropped or short_tc:
                    return groups, dropped
                break  # try the short tensor-core text before leaving a group out
    over = sum(g.width() for g in groups) + GAP * (len(groups) - 1) - width
    family = groups[0]  # still too wide: the family names are cut
    room = max(8, family.width() - over)
    family.cells = [[_cut(row[0], room)] for row in family.cells]
    return groups, dropped


def family_table(result: Mapping[str, Any], width: int) -> tuple[list[str], list[str]]:
    """The families side by side as markup lines, and the column groups left out."""
    groups, dropped = fit_groups(result, width)
    widths = [g.widths() for g in groups]
    totals = [g.width() for g in groups]
    gap = " " * GAP

    def cells(values: list[str], ws: list[int], total: int, left: bool,
              styles: list[str] | None = None) -> str:
        out = []
        for i, (v, w) in enumerate(zip(values, ws, strict=True)):
            text = v.ljust(w) if left and i == len(values) - 1 else v.rjust(w)
            text = esc(text)
            if styles and styles[i]:
                text = f"[{styles[i]}]{text}[/]"
            out.append(text)
        line = "  ".join(out)
        used = sum(ws) + 2 * (len(ws) - 1)
        return line + " " * (total - used)

    titles = gap.join(f"[b]{esc(g.title.center(t))}[/]" if g.title else " " * t
                      for g, t in zip(groups, totals, strict=True))
    heads = gap.join(f"[b]{cells(g.headers, w, t, g.left)}[/]" if g.key != "family" else
                     f"[b]{esc('family'.ljust(t))}[/]"
                     for g, w, t in zip(groups, widths, totals, strict=True))
    lines = [titles.rstrip(), heads.rstrip()]
    for r in range(len(result["families"])):
        row = []
        for g, w, t in zip(groups, widths, totals, strict=True):
            if g.key == "family":
                row.append(esc(g.cells[r][0].ljust(t)))
            else:
                row.append(cells(g.cells[r], w, t, g.left, g.styles[r] if g.styles else None))
        lines.append(gap.join(row).rstrip())
    return lines, dropped


def side_line(tag: str, sd: Mapping[str, Any]) -> str:
    """``A  #1 triton/MXFP4 (run 4) SIMULATED · load C=16, bs 15.9 measured · batch 15.9 ·
    decode step 102.8 ms GPU · 9.1 tok/s``."""
    bits = [f"load {sd['load'] or 'unknown'}",
            f"batch {_ms(sd['batch'], 'g') if sd['batch'] is not None else '?'}",
            f"decode step {_ms(sd['step_ms'], '.2f')} ms on the GPU (mean)"]
    if sd["tok_s"]:
        bits.append(f"{sd['tok_s']:.1f} tok/s (batch / step interval)")
    sim = " [b $warning]SIMULATED[/]" if sd["simulated"] else ""
    far = "  [b $warning]batch FAR from the load's C[/]" if sd["batch_far"] else ""
    return f"[b]{tag}[/]  [b]{esc(sd['title'])}[/]{sim} · {esc(' · '.join(bits))}{far}"


def _cut(name: object, width: int) -> str:
    text = str(name or "?")
    return text if len(text) <= width else text[:max(1, width - 1)] + "…"


def kernel_lines(result: Mapping[str, Any], width: int) -> list[str]:
    """The top kernels that appeared in B, vanished from A or moved most (markup)."""
    ks = result["kernels"]
    room = max(24, min(72, width - 48))
    out = []
    for key, mark, what, tag in (("appeared", "+", "appeared in B", "b"),
                                 ("vanished", "-", "vanished from A", "a")):
        of = str(result[tag]["title"]).split()[0]
        for k in ks[key]:
            rest = f"({k['family']}) {_pct(k['share'])}, {_ms(k['step_ms'])} ms per step of {of}"
            out.append(f"[b]{mark}[/] {what}: [b]{esc(_cut(k['name'], room))}[/] {esc(rest)}")
    for m in ks["moved"]:
        rest = (f"({m['family']}) {_pct(m['a']['share'])} → {_pct(m['b']['share'])}, "
                + _signed(m["step_ms_change"], "+.1f", " ms per step"))
        out.append(f"[b]~[/] moved: [b]{esc(_cut(m['name'], room))}[/] {esc(rest)}")
    return out


def compare_markup(result: Mapping[str, Any], width: int) -> str:
    """The whole comparison as markup for a panel ``width`` cells wide."""
    a, b = result["a"], result["b"]
    lines = [side_line("A", a), side_line("B", b)]
    if result["per_token"]:
        lines.append(f"[b $warning]different batches (bs {a['batch']:g} vs {b['batch']:g}): "
                     "compared per decode step AND per token (ms per step / batch)[/]")
    table, dropped = family_table(result, width)
    if dropped:
        lines.append(f"[$foreground-muted]narrow: {esc(', '.join(dropped))} left out "
                     "(a wider terminal, or dsv4tui kernels compare, shows them)[/]")
    lines.append("")
    lines += table
    lines.append("")
    lines += [f"[b]·[/] {esc(h)}" for h in result["headline"]]
    moves = kernel_lines(result, width)
    if moves:
        lines += ["", "[b]top kernels[/] (share of a decode step)", *moves]
    notes = [n for n in result["notes"] if not n.startswith("different batches")]
    if notes:
        lines.append("")
        lines += [f"[$foreground-muted]{esc(n)}[/]" for n in notes]
    return "\n".join(lines)


class KernelCompare(Static):
    """Call :meth:`show` with a ``kernel_compare.compare`` result (or a one-line reason why
    there is none); redrawn to the width it has."""

    DEFAULT_CSS = """
    KernelCompare { height: auto; padding: 0 1; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("", id=id, markup=True)
        self.result: Mapping[str, Any] | None = None
        self.reason = ""

    def show(self, result: Mapping[str, Any] | None, reason: str = "") -> None:
        self.result, self.reason = result, reason
        self.redraw()

    def on_resize(self) -> None:
        self.redraw()

    def redraw(self) -> None:
        width = max(20, (self.content_region.width or self.size.width or 100))
        if self.result is None:
            text = f"[$warning]{esc(self.reason)}[/]" if self.reason else ""
        else:
            text = compare_markup(self.result, width)
        update_static(self, text)
