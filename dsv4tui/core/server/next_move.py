"""What to try after a failed start: the documented next move as a ready ``server restart``.

The cause comes from the agent (``agent/host/failure.py``: the class, the one-line cause, the
numbers its log said); the move changes one thing of what ran: ``--cuda-graph-max-bs-decode``
halved (SGLang 0.5.20+; ``--cuda-graph-max-bs`` is a trap there: "ambiguous option"),
``--mem-fraction-static`` -0.02 (+0.02 when SGLang says the KV cache has no room),
``--chunked-prefill-size`` halved, ``--dist-timeout`` doubled, or a MoE backend that runs on
this GPU and checkpoint (backends.py's tables). :func:`sets_to_overrides` turns
``server restart --set FLAG=VALUE`` into the launch's profile overrides, validated.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from dsv4tui.agent.host import failure as agent_failure
from dsv4tui.core.errors import EXIT_CONFIG, UserError
from dsv4tui.core.server import backends, sglang_choices
from dsv4tui.core.server.launch import FIELD_FLAGS

_FLAG_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")


@dataclass(frozen=True)
class Suggestion:
    """One change to try: ``flag`` from ``from_`` to ``to`` (``backend``: a --backend
    switch), and why; ``hint`` alone when no flag would help."""

    cls: str
    cause: str
    flag: str | None = None
    from_: str | None = None
    to: str | None = None
    why: str = ""
    backend: str | None = None

    @property
    def runnable(self) -> bool:
        return self.flag is not None and self.to is not None

    def restart_args(self, sets: Sequence[str] = (), backend: str | None = None) -> list[str]:
        """The ``server restart`` options that make the move, keeping what the failed launch
        was given besides (its ``--set`` items of other flags, its ``--backend``)."""
        if not self.runnable:
            return []
        switch = self.backend or backend
        out = ["--backend", switch] if switch else []
        for item in sets:
            if self.flag is None or parse_set(item)[0] != self.flag:
                out += ["--set", item]
        if not self.backend:
            assert self.flag is not None
            out += ["--set", f"{self.flag.removeprefix('--')}={self.to}"]
        return out

    def command(self, host: str, profile: str | None, sets: Sequence[str] = (),
                backend: str | None = None) -> str | None:
        if not self.runnable:
            return None
        argv = ["dsv4tui", "server", "restart", host]
        if profile:
            argv += ["--profile", profile]
        return shlex.join(argv + self.restart_args(sets, backend))

    def text(self) -> str:
        """``--cuda-graph-max-bs-decode 256 -> 128: why``, or the hint."""
        if not self.runnable:
            return self.why
        return f"{self.flag} {self.from_} -> {self.to}: {self.why}"

    def to_json(self, host: str, profile: str | None, sets: Sequence[str] = (),
                backend: str | None = None) -> dict[str, Any]:
        return {"class": self.cls, "flag": self.flag, "from": self.from_, "to": self.to,
                "why": self.why, "command": self.command(host, profile, sets, backend)}


def _backend_move(fail: Mapping[str, Any], argv: Sequence[str],
                  profile: Mapping[str, Any], capability: str | None) -> Suggestion | None:
    """No kernel image: the MoE backend that ran (``auto`` resolves to SGLang's pick on NVFP4,
    flashinfer_trtllm_routed) swapped for one that fits the checkpoint and runs on this GPU."""
    if (fail.get("evidence") or {}).get("kernels_of") not in (None, "MoE"):
        return None  # another part's kernels (attention): not a MoE backend's to fix
    ran = agent_failure.argv_value(list(argv), "--moe-runner-backend") or \
        (fail.get("evidence") or {}).get("moe_runner_backend") or \
        profile.get("moe_runner_backend") or "auto"  # what ran, else what the profile says
    fmt = backends.checkpoint_format(profile.get("checkpoint"), profile.get("quantization"))
    meant = "flashinfer_trtllm_routed" if ran == "auto" and fmt == "NVFP4" else ran
    if meant not in sglang_choices.MOE_ARCH:
        return None  # not the MoE backend's kernels, as far as the tables know
    for name, formats in backends.BACKEND_FITS.items():
        if name in ("auto", ran, meant) or (fmt is not None and fmt not in formats):
            continue
        arch = sglang_choices.MOE_ARCH.get(name)
        if (arch is not None and capability is None) or \
                backends.gpu_misfit(name, capability):
            continue
        where = sglang_choices.sm_name(capability) or "any NVIDIA GPU"
        return Suggestion(str(fail["class"]), str(fail.get("cause") or ""),
                          "--moe-runner-backend", ran, name,
                          f"{meant}'s kernels are {sglang_choices.MOE_ARCH[meant].note}; "
                          f"{name} runs {fmt or 'this checkpoint'} on {where}", backend=name)
    return None


def suggest(fail: Mapping[str, Any] | None, argv: Sequence[str] = (),
            profile: Mapping[str, Any] | None = None,
            capability: str | None = None) -> Suggestion | None:
    """The next move for a classified failure (``status``'s or the start error's
    ``failure``), from the argv that ran and its profile; None when nothing failed."""
    if not fail or not fail.get("class"):
        return None
    cls, cause = str(fail["class"]), str(fail.get("cause") or "")
    if cls == "no_kernel_image":
        move = _backend_move(fail, argv, profile or {}, capability)
        if move is not None:
            return move
    flag = agent_failure.next_flag(dict(fail), list(argv))
    if flag is not None:
        return Suggestion(cls, cause, flag["flag"], flag["from"], flag["to"], flag["why"])
    return Suggestion(cls, cause, why=agent_failure.HINTS.get(cls, "see the log"))


def parse_set(item: str) -> tuple[str, str]:
    """``cuda-graph-max-bs-decode=128`` (or ``--cuda-graph-max-bs-decode=128``) ->
    ``("--cuda-graph-max-bs-decode", "128")``; UserError (exit 2) naming the problem."""
    name, eq, value = item.partition("=")
    name = name.strip().removeprefix("--")
    if not eq or not _FLAG_NAME.match(name):
        raise UserError(f"--set {item!r}: write FLAG=VALUE, e.g. --set "
                        "cuda-graph-max-bs-decode=128", EXIT_CONFIG)
    flag = "--" + name
    if "\x00" in value or "\n" in value or not value:
        raise UserError(f"--set {item!r}: the value is empty or has a NUL or newline",
                        EXIT_CONFIG)
    if flag in sglang_choices.TRAP_FLAGS:
        raise UserError(f"--set {flag}: {sglang_choices.TRAP_FLAGS[flag]}", EXIT_CONFIG)
    if flag == "--api-key":
        raise UserError("--set --api-key: never on a command line; the profile's api_key_env "
                        "names the host variable that holds it", EXIT_CONFIG)
    if flag == "--moe-runner-backend":
        raise UserError("--set moe-runner-backend: use --backend NAME (it checks the "
                        "checkpoint and the GPUs)", EXIT_CONFIG)
    return flag, value


def sets_to_overrides(profile: Any, items: Sequence[str]) -> dict[str, Any]:
    """``--set`` items -> the launch's profile overrides: a flag a profile field owns sets
    the field (``mem-fraction-static=0.86``), any other replaces or joins ``extra_args``.
    The launch validates the result (build_launch: types, choices, traps)."""
    overrides: dict[str, Any] = {}
    extra = list(profile.extra_args)
    for item in items:
        flag, value = parse_set(item)
        field = FIELD_FLAGS.get(flag)
        if field is not None:
            overrides[field] = value
        else:
            extra = agent_failure.with_flag(extra, flag, value)
    if extra != list(profile.extra_args):
        overrides["extra_args"] = extra
    return overrides


def of_failed_start(err: Any) -> Suggestion | None:
    """The next move of a ``StartupFailed`` (its agent class, the argv and profile that ran);
    None for anything else or a failure without a class."""
    fail, result = getattr(err, "failure", None), getattr(err, "result", None)
    if not fail or result is None:
        return None
    return suggest(fail, result.launch.argv, result.launch.profile)


def restart_change(move: Suggestion, ran_extra_args: Sequence[str]
                   ) -> tuple[str | None, dict[str, Any]]:
    """``(backend, profile overrides)`` of a restart that makes ``move``, from the extra_args
    of the launch that failed (so the changes it was launched with are kept)."""
    if move.backend:
        return move.backend, {}
    if not move.runnable:
        return None, {}
    ran = SimpleNamespace(extra_args=list(ran_extra_args))
    return None, sets_to_overrides(ran, [move.restart_args()[-1]])
