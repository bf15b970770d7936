"""GpuStrip: the whole host's GPUs in one line, for screens where the panel is too big
(the bench screen): one level cell per GPU for utilisation and for the tensor pipe, then the
host averages and totals::

    ct200 util ▇▇▇▇▇▇▇▇ 99%  tensor ▁▁▁▁▁▁▁▁ 0.8%  SM 92%  DRAM 35%  mem 968/1124G  4.9/5.6kW

Same data API as :class:`~dsv4tui.tui.widgets.gpu_panel.GpuPanel`: ``update_frame(frame)``, or
a shared ``telemetry`` plus ``refresh_telemetry()``. It never fetches anything itself.
"""

from __future__ import annotations

from rich.text import Text

from dsv4tui.core.telemetry import GpuStatus, fmt_age, mean_of, total_of
from dsv4tui.tui.widgets.cells import level_char
from dsv4tui.tui.widgets.gpu_base import TelemetryWidget


class GpuStrip(TelemetryWidget):
    """One-line summary of every GPU on one host."""

    DEFAULT_CSS = """
    GpuStrip {
        height: 1;
        padding: 0 1;
    }
    GpuStrip > .gpu-strip--host { color: $text; text-style: bold; }
    GpuStrip > .gpu-strip--label { color: $text-muted; }
    GpuStrip > .gpu-strip--value { color: $text; }
    GpuStrip > .gpu-strip--na { color: $text-disabled; }
    GpuStrip > .gpu-strip--util { color: $primary; }
    GpuStrip > .gpu-strip--tensor { color: $accent; }
    GpuStrip > .gpu-strip--warn { color: $warning; text-style: bold; }
    GpuStrip > .gpu-strip--error { color: $error; text-style: bold; }
    GpuStrip > .gpu-strip--stale { color: $text-disabled; }
    GpuStrip > .gpu-strip--sim { color: $warning; text-style: bold reverse; }
    """

    COMPONENT_CLASSES = {
        "gpu-strip--host", "gpu-strip--label", "gpu-strip--value", "gpu-strip--na",
        "gpu-strip--util", "gpu-strip--tensor", "gpu-strip--warn", "gpu-strip--error",
        "gpu-strip--stale", "gpu-strip--sim",
    }

    COMPONENT_PREFIX = "gpu-strip"
    RELAYOUT = False

    def lines(self, width: int) -> list[Text]:
        return [self.render()]

    def render(self) -> Text:
        """The strip as Rich Text (drawing goes through :meth:`lines`)."""
        t = self._telemetry
        now = t.clock()
        out = Text(no_wrap=True, overflow="ellipsis")
        out.append(t.host or "GPUs", self._style("host"))
        error = self._error or t.error
        if error:
            out.append(f" {error}", self._style("error"))
            return out
        statuses = t.gpus(now)
        if not statuses:
            out.append(" waiting for telemetry…", self._style("na"))
            return out
        host_stale = t.is_stale(None, now)
        fresh = [s for s in statuses if not s.stale] or statuses  # all stale: last values
        self._cells(out, "util", statuses, "util_gpu", "util")
        self._avg(out, [s.sample.util_gpu for s in fresh], decimals=0)
        self._cells(out, "tensor", statuses, "tensor_active", "tensor")
        tensor = mean_of([s.sample.tensor_active for s in fresh])
        busy = mean_of([s.sample.util_gpu for s in fresh])
        warn = tensor is not None and busy is not None and busy >= 50 and tensor < 5
        self._avg(out, [s.sample.tensor_active for s in fresh], decimals=1, warn=warn)
        width = self.size.width or 200
        extras: list[tuple[str, str, bool]] = []
        sm = mean_of([s.sample.sm_active for s in fresh])
        dram = mean_of([s.sample.dram_active for s in fresh])
        extras.append(("SM", "n/a" if sm is None else f"{sm:.0f}%", sm is None))
        extras.append(("DRAM", "n/a" if dram is None else f"{dram:.0f}%", dram is None))
        used = total_of([s.sample.mem_used_mib for s in fresh])
        total = total_of([s.sample.mem_total_mib for s in fresh])
        mem = "n/a" if used is None or total is None else f"{used / 1024:.0f}/{total / 1024:.0f}G"
        extras.append(("mem", mem, mem == "n/a"))
        power = total_of([s.sample.power_w for s in fresh])
        limit = total_of([s.sample.power_limit_w for s in fresh])
        pw = "n/a" if power is None or limit is None else f"{power / 1000:.1f}/{limit / 1000:.1f}kW"
        extras.append(("power", pw, pw == "n/a"))
        right = Text(no_wrap=True)
        if host_stale:
            right.append(f" stale {fmt_age(t.age(None, now) or 0.0)} ", self._style("warn"))
        elif len(fresh) < len(statuses):
            right.append(f" {len(statuses) - len(fresh)} stale ", self._style("warn"))
        if t.simulated:
            right.append(" SIMULATED ", self._style("sim"))
        for label, value, na in extras:
            piece = len(label) + len(value) + 3
            if out.cell_len + piece + right.cell_len > width:
                break
            out.append(f"  {label} ", self._style("label"))
            out.append(value, self._style("na" if na else "value"))
        if right.cell_len:
            out.truncate(max(0, width - right.cell_len), overflow="ellipsis", pad=True)
            out.append_text(right)
        if host_stale:
            out.stylize(self._style("stale"), 0, max(0, out.cell_len - right.cell_len))
        return out

    def _cells(self, out: Text, label: str, statuses: list[GpuStatus], metric: str,
               style: str) -> None:
        out.append(f" {label} ", self._style("label"))
        for s in statuses:
            v = s.sample.value(metric)
            ch = level_char(None if v is None else v / 100.0)
            out.append(ch, self._style("stale" if s.stale else ("na" if v is None else style)))

    def _avg(self, out: Text, values: list[float | None], decimals: int,
             warn: bool = False) -> None:
        v = mean_of(values)
        if v is None:
            out.append(" n/a", self._style("na"))
        else:
            out.append(f" {v:.{decimals}f}%", self._style("warn" if warn else "value"))
