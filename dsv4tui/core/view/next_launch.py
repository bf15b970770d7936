"""What the next restart of each launch profile changes from its config: the MoE backend
(``b``) and the attention flags (``a``) picked on the dashboard. A pick stays with its profile
for the restarts after it, as the config's values would."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dsv4tui.core.server import attention

if TYPE_CHECKING:
    from dsv4tui.core.config import ServerProfile
    from dsv4tui.core.view.model import UiModel


class NextLaunch:
    def __init__(self) -> None:
        self.backends: dict[str, str] = {}  # profile -> the backend picked for it
        self.attention: dict[str, dict[str, str | None]] = {}  # profile -> flags picked

    def take(self, profile: str, backend: str | None = None,
             flags: dict[str, str | None] | None = None
             ) -> tuple[str | None, dict[str, str | None]]:
        """A restart of ``profile`` with ``backend`` / ``flags`` picked now (kept for its
        next restarts): the backend and the attention flags it launches with."""
        backend = backend or self.backends.get(profile)
        if backend:
            self.backends[profile] = backend
        if flags:
            self.attention.setdefault(profile, {}).update(flags)
        return backend, dict(self.attention.get(profile, {}))

    def backend_for(self, model: UiModel, profile: str | None) -> str:
        """The backend the next restart of ``profile`` (default: the active one) runs."""
        if profile and profile in self.backends:
            return self.backends[profile]
        prof = model.profile(profile)
        return prof.backend if prof else "auto"

    def running_backend(self, model: UiModel, profile: str) -> str:
        """The backend ``profile`` runs now when it is the server's, else its next one's."""
        srv = model.server
        if srv.profile == profile and srv.backend:
            return srv.backend
        return self.backend_for(model, profile)

    def attention_for(self, profile: str, config: ServerProfile) -> dict[str, str | None]:
        """Every attention flag the next restart of ``profile`` (``config``) passes."""
        return attention.current(config, self.attention.get(profile))

    def sweep_label(self, model: UiModel) -> str:
        """A sweep's default label: ``<checkpoint>_<backend>`` of what runs (or will)."""
        srv = model.server
        prof = model.profile(srv.profile)
        ckpt = srv.checkpoint or (prof.checkpoint if prof else "run")
        backend = srv.backend or (self.backend_for(model, prof.name) if prof else "auto")
        return f"{ckpt}_{backend}"
