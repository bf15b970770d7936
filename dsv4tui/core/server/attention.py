"""The attention flags of a launch: which ones a model takes (DeepSeek-V4 models have two
kernels of their own besides ``--attention-backend``), what each one selects, and the values
a profile's next restart uses (its own fields, then what was picked for it since)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dsv4tui.core.config import ServerProfile

FIELDS = ("dsv4_attn_backend", "dsv4_prefill_backend", "attention_backend")
TITLES = {
    "dsv4_attn_backend": "--dsv4-attn-backend · DeepSeek-V4's sparse attention kernel",
    "dsv4_prefill_backend": "--dsv4-prefill-backend · DeepSeek-V4's sparse prefill path",
    "attention_backend": "--attention-backend",
}


def is_dsv4(profile: ServerProfile) -> bool:
    """A DeepSeek-V4 model (its path says so): it takes the two ``--dsv4-*`` kernels."""
    return "deepseek-v4" in profile.model_path.lower()


def fields_for(profile: ServerProfile) -> tuple[str, ...]:
    """The attention flags ``profile``'s model takes, its own kernels first."""
    return FIELDS if is_dsv4(profile) else ("attention_backend",)


def title(field: str, profile: ServerProfile) -> str:
    """What flag ``field`` selects, for this model."""
    if field == "attention_backend" and is_dsv4(profile):
        return TITLES[field] + " · SGLang uses dsv4 for DeepSeek-V4"
    return TITLES[field]


def current(profile: ServerProfile,
            picked: Mapping[str, str | None] | None = None) -> dict[str, str | None]:
    """Every attention flag's value for the next restart: the profile's, then ``picked``
    (None: the flag is not given, SGLang picks)."""
    out: dict[str, str | None] = {f: getattr(profile, f) for f in FIELDS}
    out.update(picked or {})
    return out
