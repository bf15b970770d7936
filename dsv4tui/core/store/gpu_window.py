"""GPU summaries over a level's window: the agent's :mod:`dsv4tui.agent.host.gpu_window` (the
host-side campaign runner computes the same summaries next to the GPUs)."""

from dsv4tui.agent.host.gpu_window import FIELDS, GpuWindow

__all__ = ["FIELDS", "GpuWindow"]
