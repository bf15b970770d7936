"""A host's launch profiles as the model shows them, and a fresh model for a host."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dsv4tui.core.view import model as m

if TYPE_CHECKING:
    from dsv4tui.core.config import HostConfig, ServerProfile

# (label, field) of the profile fields the Launch screen lists when they are set
_SHOWN = (("attention", "attention_backend"), ("dsv4 attention", "dsv4_attn_backend"),
          ("dsv4 prefill", "dsv4_prefill_backend"), ("kv cache", "kv_cache_dtype"),
          ("mem fraction", "mem_fraction_static"), ("dp size", "dp_size"), ("ep size", "ep_size"),
          ("speculative", "speculative_algorithm"), ("port", "port"), ("python", "python"))


def profile_choice(name: str, p: ServerProfile) -> m.ProfileChoice:
    """Profile ``name`` as the Launch screen and the pickers show it."""
    fields = [(label, str(getattr(p, attr))) for label, attr in _SHOWN
              if getattr(p, attr) is not None]
    if p.extra_args:
        fields.append(("extra args", " ".join(p.extra_args)))
    return m.ProfileChoice(name=name, checkpoint=p.checkpoint_label, quantization=p.quantization,
                           backend=p.backend_label, model_path=p.model_path, tp_size=p.tp_size,
                           fields=fields)


def profiles_of(config: HostConfig) -> list[m.ProfileChoice]:
    return [profile_choice(n, p) for n, p in config.profiles.items()]


def model_for(name: str, config: HostConfig, *, simulated: bool) -> m.UiModel:
    """A fresh model for host ``name`` (profiles from its config, the default one active)."""
    from dsv4tui.core.telemetry import HostTelemetry

    model = m.UiModel()
    model.conn = m.Connection(host=name, simulated=simulated)
    model.profiles = profiles_of(config)
    if config.profiles:
        model.active_profile = config.default_profile or next(iter(config.profiles))
    model.telemetry = HostTelemetry(name)
    return model
