"""What the dashboard's pickers list: the entries of the MoE backend, attention backend,
launch profile and campaign pickers, each with the note that says what it runs on.

Which backend fits which checkpoint is :mod:`dsv4tui.core.server.backends`' table (the CLI
refuses the misfits); the attention flags' choices come from the host's SGLang version
(:mod:`dsv4tui.core.server.sglang_choices`) and the GPUs' compute capability.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dsv4tui.core.server import attention, backends, sglang_choices

if TYPE_CHECKING:
    from dsv4tui.core.config import ServerProfile
    from dsv4tui.core.view.model import ProfileChoice


@dataclass(frozen=True)
class Choice:
    """One entry of a picker: ``value`` is what picking it answers; a disabled one is a
    heading."""

    value: str
    title: str
    note: str = ""
    current: bool = False
    enabled: bool = True


def backend_choices(checkpoint: str, current: str, quantization: str | None = None,
                    capability: str | None = None) -> list[Choice]:
    """The backends that fit ``checkpoint`` (the current one marked, and kept even when it
    does not fit, saying why), with what each runs on; ``capability``: the GPUs' ("12.0"),
    where a backend's kernels do not run on them it is marked ✗ with the reason (picking it
    is refused: ``backends.refuse_backend``), ✓ where the table says they do."""
    out = []
    sm = sglang_choices.sm_name(capability)
    for name in sglang_choices.MOE_RUNNER_BACKENDS:
        fits = backends.fits(name)
        misfit = backends.checkpoint_misfit(checkpoint, name, quantization)
        known = fits is not None and backends.checkpoint_format(checkpoint, quantization)
        if (not known or misfit is not None) and name != current:
            continue
        note = sglang_choices.MOE_BACKEND_NOTES.get(name, "")
        fit = misfit or (f"fits {', '.join(fits)}" if fits else
                         "not known to fit this checkpoint")
        arch = sglang_choices.ARCH_NOTES["moe_runner_backend"].get(name)
        gpu = sglang_choices.arch_misfit("moe_runner_backend", name, capability)
        if gpu:
            fit = f"✗ {gpu} · {fit}"
        elif sm and arch is not None and arch.majors is not None:
            fit = f"✓ runs on {sm} · {fit}"
        out.append(Choice(name, name, f"{fit} — {note}" if note else fit, current=name == current))
    return out


def attention_choices(profile: ServerProfile, current: Mapping[str, str | None],
                      capability: str | None, version: str | None) -> list[Choice]:
    """The attention flags' valid choices for the host's SGLang (``field=value`` each), the
    current ones marked, what each runs on where SGLang says so (``capability``: the GPUs'
    compute capability, "12.0"); DeepSeek-V4 models get their two kernels first. Each flag
    starts with a disabled heading (``#field``)."""
    lists, _ = sglang_choices.lists_for(version)
    sm = sglang_choices.sm_name(capability)
    out: list[Choice] = []
    for name in attention.fields_for(profile):
        values = lists.of(name)
        now = current.get(name)
        unset = now is None
        out.append(Choice(f"#{name}", attention.title(name, profile), enabled=False))
        for value in values:
            arch = sglang_choices.ARCH_NOTES.get(name, {}).get(value)
            misfit = sglang_choices.arch_misfit(name, value, capability)
            note = arch.note if arch else ""
            if misfit:
                note = f"✗ {misfit} — {note}" if note else f"✗ {misfit}"
            elif sm and arch is not None and arch.majors is not None:
                note = f"✓ runs on {sm} — {note}"
            is_current = now == value or (unset and value == "auto")
            out.append(Choice(f"{name}={value}", value, note, current=is_current))
        if unset and "auto" not in values:
            out.append(Choice(f"{name}=", "(unset: SGLang picks)", "the profile sets no flag",
                              current=True))
    return out


def picked_attention(value: str | None) -> tuple[str, str | None] | None:
    """The ``(flag field, value)`` an attention picker answer sets (value None: unset), or
    None for no answer or a heading."""
    if not value or value.startswith("#"):
        return None
    field_name, _, picked = value.partition("=")
    return field_name, picked or None


def profile_choices(profiles: Sequence[ProfileChoice], current: str | None,
                    backend_for: Callable[[str], str]) -> list[Choice]:
    """The host's launch profiles: checkpoint, the backend its next restart uses, model."""
    return [Choice(p.name, p.name, f"{p.checkpoint} · {backend_for(p.name)} · {p.model_path}",
                   current=p.name == current) for p in profiles]


def campaign_choices(found: Mapping[str, Any]) -> list[Choice]:
    """The campaigns configured for a host (name -> CampaignConfig), with their variants."""
    return [Choice(name, name, f"{len(c.variants)} variants: "
                   + ", ".join(v.name for v in c.variants)) for name, c in found.items()]
