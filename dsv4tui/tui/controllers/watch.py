"""What the console watches on the host, shared by the controllers that read it: the sweep or
campaign being watched, the one this console started, the running levels' live figures."""

from __future__ import annotations

from dataclasses import dataclass, field

from dsv4tui.core.view import model as m


@dataclass
class Watch:
    watched: str | None = None  # the campaign (a sweep is one too) being watched
    own: str | None = None  # the sweep or campaign this console started
    live: dict[int, m.LiveLevel] = field(default_factory=dict)  # running levels' figures
