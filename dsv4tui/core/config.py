"""Configuration: pydantic models loaded from a TOML file.

The file lives at the platformdirs user config dir (``config.toml``), overridable by
``--config PATH`` or ``DSV4TUI_CONFIG``. Invalid files raise :class:`ConfigError` with one
line naming the file, the key path and the problem.
"""

from __future__ import annotations

import difflib
import re
import tomllib
from collections.abc import Sequence
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from dsv4tui.agent.bench import datasets
from dsv4tui.agent.bench import plan as sweep_plan
from dsv4tui.agent.bench.levels import check_level
from dsv4tui.agent.bench.sanity_cases import DEFAULT_CASES
from dsv4tui.agent.campaign import variant_kernels
from dsv4tui.agent.kernels import settings as capture_settings
from dsv4tui.core import actions, paths, theme_names
from dsv4tui.core.errors import ConfigError
from dsv4tui.core.server import sglang_choices

LOCAL = "local"
DEMO = "demo"
DEMO_PAIR = "demo-pair"  # the two-node demo host (two simulated nodes on this machine)
DEMO_NODES = ("demo-node0", "demo-node1")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


def did_you_mean(key: str, keys: Sequence[str]) -> str:
    """`` (did you mean moe_runner_backend?)`` for a near miss of ``keys``, else the valid
    ones."""
    near = difflib.get_close_matches(key, list(keys), n=2, cutoff=0.6)
    if near:
        return f" (did you mean {' or '.join(near)}?)"
    return f" (valid: {', '.join(keys)})" if keys else ""


def _check_choice(value: str | None, choices: tuple[str, ...], what: str) -> str | None:
    if value is None or value in choices:
        return value
    raise ValueError(f"unknown {what} {value!r}; valid: {', '.join(choices)}")


class ServerProfile(_Model):
    """One way to launch SGLang on a host (a checkpoint + its flags)."""

    python: str = Field("python3", description="The SGLang venv's interpreter on the host.")
    module: str = Field("sglang.launch_server", description="Module run with `python -m`.")
    model_path: str = Field(..., min_length=1, description="--model-path")
    served_model_name: str | None = Field(None, description="--served-model-name")
    host: str = Field("127.0.0.1", description="--host")
    port: int = Field(30000, ge=1, le=65535, description="--port")
    tp_size: int | None = Field(None, ge=1, description="--tp-size")
    dp_size: int | None = Field(None, ge=1, description="--dp-size")
    ep_size: int | None = Field(None, ge=1, description="--ep-size")
    quantization: str | None = Field(None, description="--quantization")
    checkpoint: str | None = Field(
        None, description="Label for the checkpoint format (e.g. MXFP4, NVFP4); shown and stored "
        "with runs. Defaults to the quantization.")
    moe_runner_backend: str | None = Field(None, description="--moe-runner-backend")
    attention_backend: str | None = Field(None, description="--attention-backend")
    dsv4_attn_backend: str | None = Field(
        None, description="--dsv4-attn-backend (DeepSeek-V4 models: the sparse attention kernel)")
    dsv4_prefill_backend: str | None = Field(
        None, description="--dsv4-prefill-backend (DeepSeek-V4 models: the sparse prefill path)")
    kv_cache_dtype: str | None = Field(None, description="--kv-cache-dtype")
    mem_fraction_static: float | None = Field(None, gt=0, le=1, description="--mem-fraction-static")
    speculative_algorithm: str | None = Field(None, description="--speculative-algorithm")
    speculative_num_steps: int | None = Field(None, ge=1)
    speculative_eagle_topk: int | None = Field(None, ge=1)
    speculative_num_draft_tokens: int | None = Field(None, ge=1)
    trust_remote_code: bool = Field(False, description="--trust-remote-code")
    enable_metrics: bool = Field(True, description="--enable-metrics (for /metrics)")
    api_key_env: str | None = Field(
        None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="Name of an env var holding the API key (never the key itself).")
    extra_args: list[str] = Field(default_factory=list, description="More launch flags, as argv.")
    env: dict[str, str] = Field(default_factory=dict, description="Environment for the server.")
    log_file: str | None = Field(None, description="Server log on the host (default in the agent cache).")
    workdir: str | None = Field(None, description="Working directory on the host.")
    active_params_b: float | None = Field(
        None, gt=0, description="Active parameters per token, in billions (roofline override; "
        "e.g. 13 for DeepSeek-V4-Flash). Default: read from the model's config.json.")
    bytes_per_param: float | None = Field(
        None, gt=0, description="Bytes per weight for the roofline (0.5 for FP4, 1 for FP8, 2 for "
        "BF16). Default: from quantization/checkpoint.")
    nnodes: int | None = Field(None, ge=1, description="--nnodes (a host made of nodes: "
                               "the number of its nodes, set for you)")
    node_rank: int | None = Field(None, ge=0, description="--node-rank (a host made of nodes: "
                                  "each node's position, set for you)")
    dist_init_addr: str | None = Field(None, description="--dist-init-addr HOST:PORT (a host "
                                       "made of nodes: default node 0's address and "
                                       "dist_init_port)")
    dist_init_port: int | None = Field(None, ge=1, le=65535, description="The port of the "
                                       "default --dist-init-addr on node 0 (a host made of "
                                       "nodes; default 20000).")

    @field_validator(*(f for f in sglang_choices.CHOICE_FIELDS if f != "speculative_algorithm"))
    @classmethod
    def _choice(cls, v: str | None, info: ValidationInfo) -> str | None:
        # any SGLang version's value: a launch checks the lists of the host's version
        field = str(info.field_name)
        return _check_choice(v, sglang_choices.ANY.of(field), field)

    @field_validator("speculative_algorithm")
    @classmethod
    def _spec(cls, v: str | None) -> str | None:
        if v is not None and v.upper() == "MTP":
            raise ValueError("'MTP' is not a speculative algorithm in SGLang; for DeepSeek MTP "
                             "heads use EAGLE (topk 1) or NEXTN")
        return _check_choice(v, sglang_choices.ANY.speculative_algorithm, "speculative_algorithm")

    @field_validator("extra_args")
    @classmethod
    def _extra(cls, v: list[str]) -> list[str]:
        for arg in v:
            flag = arg.split("=", 1)[0]
            if flag in sglang_choices.TRAP_FLAGS:
                raise ValueError(f"{flag}: {sglang_choices.TRAP_FLAGS[flag]}")
            if "\x00" in arg or "\n" in arg:
                raise ValueError(f"argument {arg!r} contains a NUL or newline")
        return v

    @property
    def checkpoint_label(self) -> str:
        return self.checkpoint or self.quantization or "default"

    @property
    def backend_label(self) -> str:
        return self.moe_runner_backend or "auto"


class SanityCase(_Model):
    """A prompt whose answer must match a regex before any run is measured."""

    name: str = ""
    prompt: str = Field(..., min_length=1)
    expect: str = Field(..., description="Regex the whole answer must match (re.search).")
    max_tokens: int = Field(24, ge=1)
    temperature: float = Field(0.0, ge=0)

    @field_validator("expect")
    @classmethod
    def _regex(cls, v: str) -> str:
        try:
            re.compile(v)
        except re.error as exc:
            raise ValueError(f"invalid regex {v!r}: {exc}") from exc
        return v


DEFAULT_SANITY = SanityCase(**DEFAULT_CASES[0])  # the agent's: one definition of the gate

Level = Annotated[tuple[int, int], Field(description="(concurrency C, requests n)")]
Rate = Annotated[tuple[float, int], Field(description="(request rate r req/s, requests n)")]
GoodputKey = Literal["ttft_ms", "tpot_ms", "e2el_ms"]


def _plan_field(name: str, **kw: Any) -> Any:
    """A SweepPlan field with the agent's default and limits (agent/bench/plan.py)."""
    return _agent_field(sweep_plan.FIELDS[name], **kw)


def _agent_field(f: sweep_plan.Field, **kw: Any) -> Any:
    """A pydantic Field with the default and limits of the agent's definition ``f``."""
    if f.low is not None:
        kw["gt" if f.above else "ge"] = f.low
    if f.high is not None:
        kw["le"] = f.high
    if isinstance(f.default, list):
        return Field(default_factory=lambda: [tuple(x) for x in f.default], **kw)
    return Field(f.default, **kw)


class SweepPlan(_Model):
    """A sweep: closed-loop levels of (C, n) requests, then open-loop levels of (rate, n).
    Its defaults, limits and checks are the agent's (agent/bench/plan.py)."""

    levels: list[Level] = _plan_field("levels")
    rates: list[Rate] = _plan_field("rates", description="Open-loop levels (r req/s, n "
                              "requests), after the C levels: requests sent on a seeded "
                              "timeline whatever is in flight.")
    arrival: Literal["poisson", "constant"] = _plan_field(
        "arrival", description="Rate levels' arrivals: Poisson (bench_serving's) or constant.")
    max_concurrency: int | None = _plan_field("max_concurrency", description="At most this many requests "
                                        "of a rate level in flight (the rest wait for a slot).")
    input_len: int = _plan_field("input_len", description="Prompt length in tokens (approximate words).")
    output_len: int = _plan_field("output_len", description="Output tokens per request (ignore_eos).")
    random_range_ratio: float = _plan_field(
        "random_range_ratio", description="Input and output lengths uniform in [L*r, L] "
        "(bench_serving's --random-range-ratio); 1 = fixed lengths.")
    dataset: str | None = Field(None, description="Prompts from this file on the console: "
                                "ShareGPT JSON, or JSON lines of {prompt, output_len}.")
    dataset_prompts: list[tuple[str, int | None]] | None = Field(
        None, description="The dataset's prompts as shipped with the plan (filled from "
        "`dataset`; a seeded sample when the file is large).")
    dataset_info: dict[str, Any] | None = Field(None, description="Where dataset_prompts "
                                                "came from (path, format, entries, shipped).")
    warmup: int = _plan_field("warmup", description="Uncounted warm-up requests per level.")
    temperature: float = _plan_field("temperature")
    endpoint: Literal["chat", "completions"] = _plan_field("endpoint")
    request_timeout_s: float = _plan_field("request_timeout_s")
    stall_timeout_s: float = _plan_field("stall_timeout_s", description="No bytes for this long = stalled.")
    max_error_rate: float = _plan_field("max_error_rate", description="Stop the sweep above this.")
    ignore_eos: bool = _plan_field("ignore_eos", description="Send ignore_eos for fixed output lengths "
                             "(SGLang, vLLM); false for servers that reject it.")
    seed: int | None = _plan_field("seed", description="Prompt and arrival seed, >= 0 (default: "
                             "random per run; the seed used is stored with each level).")
    allow_busy: bool = _plan_field("allow_busy", description="Measure a level even when the server is busy "
                             "before it (the level is marked busy instead of refused).")
    goodput: dict[GoodputKey, float] | None = Field(
        None, description="Targets a good request meets (ms): ttft_ms, tpot_ms, e2el_ms.")
    stop_when_saturated: bool = _plan_field("stop_when_saturated", description="Stop after two levels in a row in "
                                      "which the server did not keep up.")
    workers: int | None = _plan_field("workers", description="Load generator processes per level "
                                "(default: from the level and the host's cores).")

    @model_validator(mode="before")
    @classmethod
    def _dataset(cls, data: Any) -> Any:
        """A dataset file is read here, on the console, and its prompts travel with the plan
        (read again only when the path changed)."""
        if not isinstance(data, dict):
            return data
        path = data.get("dataset")
        if not path:
            if data.get("dataset_info") and data.get("dataset_prompts"):
                return {**data, "dataset_prompts": None, "dataset_info": None}
            return data
        info = data.get("dataset_info") or {}
        if data.get("dataset_prompts") and info.get("path") == path:
            return data
        try:
            fmt, entries = datasets.load(str(path))
        except datasets.DatasetError as exc:
            raise ValueError(f"dataset: {exc}") from None
        shipped = datasets.ship(entries, int(data.get("seed") or 0))
        return {**data, "dataset_prompts": [list(e) for e in shipped],
                "dataset_info": datasets.info(str(path), fmt, len(entries), len(shipped))}

    @field_validator("levels")
    @classmethod
    def _levels(cls, v: list[tuple[int, int]]) -> list[tuple[int, int]]:
        for c, n in v:
            check_level(c, n)  # the agent's own check of its --levels (agent/bench/levels.py)
        return v

    @field_validator("rates")
    @classmethod
    def _rates(cls, v: list[tuple[float, int]]) -> list[tuple[float, int]]:
        for r, n in v:
            if not r > 0 or r == float("inf"):
                raise ValueError(f"rate level {r:g}:{n}: the rate must be > 0 requests/s")
            if n < 1:
                raise ValueError(f"rate level {r:g}:{n}: n must be >= 1")
        return v

    @field_validator("goodput")
    @classmethod
    def _goodput(cls, v: dict[str, float] | None) -> dict[str, float] | None:
        if v is not None:
            if not v:
                raise ValueError("goodput: give at least one of ttft_ms, tpot_ms, e2el_ms")
            for key, ms in v.items():
                if not ms > 0:
                    raise ValueError(f"goodput {key}: the target must be > 0 ms")
        return v

    @model_validator(mode="after")
    def _some_level(self) -> SweepPlan:
        if not self.levels and not self.rates:
            raise ValueError("at least one level (C:n) or rate level (rate:n)")
        sweep_plan.check(self.model_dump(mode="json"))  # the agent's check: what runs there
        return self

    def level_shapes(self) -> list[tuple[int, int]]:
        """(C, n) of every level in the order they run: the C levels, then the rate levels
        (C = max_concurrency, or 0 without a cap) — what a live table needs per row."""
        cap = self.max_concurrency or 0
        return [*self.levels, *((cap, n) for _, n in self.rates)]


class SanitySettings(_Model):
    cases: list[SanityCase] = Field(default_factory=list,
                                    description="Added after the built-in 17*23 case.")
    include_default: bool = True

    def suite(self) -> list[SanityCase]:
        return ([DEFAULT_SANITY] if self.include_default else []) + list(self.cases)


_SLURM_TIME = re.compile(r"^(\d+-)?\d+(:\d{1,2}){0,2}$|^UNLIMITED$|^INFINITE$")
_SLURM_NAME = re.compile(r"^[A-Za-z0-9_.,\-\[\]]+$")


class SlurmConfig(_Model):
    """What a Slurm job of this host asks for (``[hosts.NAME.slurm]``): its launches are one
    ``sbatch`` job running one rank per node with ``srun``."""

    partition: str | None = Field(None, description="#SBATCH --partition (default: the "
                                  "cluster's default partition).")
    nodes: int = Field(1, ge=1, description="#SBATCH --nodes: the nodes of one launch (one "
                       "SGLang rank each).")
    gpus_per_node: int | None = Field(None, ge=1, description="#SBATCH --gpus-per-node (also "
                                      "checks tp/ep sizes).")
    time: str | None = Field(None, description="#SBATCH --time, e.g. \"04:00:00\" or "
                             "\"1-00:00:00\".")
    account: str | None = Field(None, description="#SBATCH --account.")
    sbatch: list[str] = Field(default_factory=list, description="More #SBATCH options, one "
                              "each, e.g. [\"--exclusive\", \"--qos=high\"].")
    env: dict[str, str] = Field(default_factory=dict, description="Environment exported on "
                                "every node of the job (e.g. NCCL_IB_HCA).")
    job_name: str | None = Field(None, description="#SBATCH --job-name (default dsv4tui-HOST).")

    @field_validator("partition", "account", "job_name")
    @classmethod
    def _name(cls, v: str | None) -> str | None:
        if v is not None and not _SLURM_NAME.match(v):
            raise ValueError(f"{v!r} is not a Slurm name (letters, digits, _ . , - [ ])")
        return v

    @field_validator("time")
    @classmethod
    def _time(cls, v: str | None) -> str | None:
        if v is not None and not _SLURM_TIME.match(v):
            raise ValueError(f"{v!r} is not a Slurm time limit (MM, HH:MM:SS, D-HH:MM:SS)")
        return v

    @field_validator("sbatch")
    @classmethod
    def _sbatch(cls, v: list[str]) -> list[str]:
        for opt in v:
            if not opt.startswith("-") or any(c in opt for c in "\n\r\x00"):
                raise ValueError(f"{opt!r}: each entry is one sbatch option, starting with -")
            if opt.split("=", 1)[0] in ("--nodes", "-N", "--ntasks-per-node", "--job-name",
                                        "-J", "--output", "-o", "--parsable"):
                raise ValueError(f"{opt!r} is set by dsv4tui (nodes: the slurm table's "
                                 "nodes)")
        return v

    @field_validator("env")
    @classmethod
    def _env(cls, v: dict[str, str]) -> dict[str, str]:
        for key, value in v.items():
            if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", key):
                raise ValueError(f"{key!r} is not a valid environment variable name")
            if "\x00" in value:
                raise ValueError(f"{key} contains a NUL byte")
        return v


class HostConfig(_Model):
    """A GPU host."""

    ssh: str | None = Field(None, description="ssh target: an ~/.ssh/config alias or user@host[:port].")
    python: str | None = Field(None, description="python3 on the host that runs the agent.")
    profiles: dict[str, ServerProfile] = Field(default_factory=dict)
    default_profile: str | None = None
    connect_timeout_s: float = Field(10.0, gt=0)
    keepalive_s: float = Field(15.0, gt=0)
    nodes: list[str] | None = Field(
        None, description="A host made of several nodes: the hosts (config hosts, ~/.ssh/config "
        "aliases or local) that run one launch together, node rank = position.")
    gpus: int | None = Field(None, ge=1, description="GPUs of this host (of each node, for a "
                             "host made of nodes), when known: tp/ep sizes are checked "
                             "against it.")
    slurm: SlurmConfig | None = Field(
        None, description="A Slurm host: ssh names its login node (none or \"local\": this "
        "machine), and each launch is one sbatch job of slurm.nodes nodes.")

    @property
    def is_slurm(self) -> bool:
        return self.slurm is not None

    @model_validator(mode="after")
    def _slurm(self) -> HostConfig:
        if self.slurm is None:
            return self
        if self.nodes is not None:
            raise ValueError("a Slurm host gets its nodes from Slurm: leave out nodes "
                             "(slurm.nodes says how many)")
        n = self.slurm.nodes
        per_node = self.slurm.gpus_per_node or self.gpus
        for name, prof in self.profiles.items():
            where = f"profiles.{name}"
            if prof.nnodes is not None and prof.nnodes != n:
                raise ValueError(f"{where}.nnodes = {prof.nnodes} does not match slurm.nodes "
                                 f"= {n}; leave it out")
            if prof.node_rank is not None:
                raise ValueError(f"{where}.node_rank: each node's rank is its SLURM_NODEID; "
                                 "leave it out")
            for field in ("tp_size", "ep_size"):
                size = getattr(prof, field)
                if size is not None and size % n:
                    raise ValueError(f"{where}.{field} = {size} does not divide over the {n} "
                                     "nodes")
                if size is not None and per_node is not None and size // n > per_node:
                    raise ValueError(f"{where}.{field} = {size} needs {size // n} GPUs on each "
                                     f"of the {n} nodes; they have {per_node}")
        return self

    @model_validator(mode="after")
    def _group(self) -> HostConfig:
        if self.nodes is None:
            return self
        if len(self.nodes) < 2:
            raise ValueError("nodes: a host made of nodes needs at least 2 (one host is "
                             "[hosts.NAME] with ssh)")
        dupes = sorted({n for n in self.nodes if self.nodes.count(n) > 1})
        if dupes:
            raise ValueError(f"nodes: {dupes[0]!r} is listed twice (each node runs one rank)")
        if self.ssh is not None:
            raise ValueError("a host made of nodes has no ssh of its own: each node has its "
                             "own (set ssh on the node hosts)")
        n = len(self.nodes)
        for name, prof in self.profiles.items():
            where = f"profiles.{name}"
            if prof.nnodes is not None and prof.nnodes != n:
                raise ValueError(f"{where}.nnodes = {prof.nnodes} does not match the {n} nodes "
                                 f"({', '.join(self.nodes)}); leave it out")
            if prof.node_rank is not None:
                raise ValueError(f"{where}.node_rank: each node's rank is its position in "
                                 "nodes; leave it out")
            for field in ("tp_size", "ep_size"):
                size = getattr(prof, field)
                if size is not None and size % n:
                    raise ValueError(f"{where}.{field} = {size} does not divide over the {n} "
                                     "nodes")
                if size is not None and self.gpus is not None and size // n > self.gpus:
                    raise ValueError(f"{where}.{field} = {size} needs {size // n} GPUs on each "
                                     f"of the {n} nodes; they have {self.gpus}")
        return self

    @model_validator(mode="after")
    def _default_profile(self) -> HostConfig:
        if self.default_profile is not None and self.default_profile not in self.profiles:
            raise ValueError(f"default_profile {self.default_profile!r} is not one of the "
                             f"profiles: {', '.join(self.profiles) or '(none)'}")
        return self

    def profile(self, name: str | None = None) -> tuple[str, ServerProfile]:
        if not self.profiles:
            raise ConfigError("this host has no server profiles ([hosts.NAME.profiles.P])")
        key = name or self.default_profile or next(iter(self.profiles))
        if key not in self.profiles:
            raise ConfigError(f"unknown profile {key!r}; this host has: {', '.join(self.profiles)}")
        return key, self.profiles[key]


class CampaignVariant(BaseModel):
    """One variant of a campaign: a name, and what it changes of the campaign's base launch
    profile (``profile`` picks another of the host's profiles as the base; any other key is a
    ServerProfile field, e.g. ``moe_runner_backend = "marlin"``)."""

    model_config = ConfigDict(extra="allow", validate_assignment=True)

    name: str = Field(..., min_length=1, description="The variant's name (its runs' label).")
    profile: str | None = Field(None, description="Another launch profile as this variant's base.")
    label: str | None = Field(None, description="The runs' label (default: the name).")
    force: bool = Field(False, description="Launch even if the MoE backend does not fit the "
                        "checkpoint (you know better).")

    @model_validator(mode="after")
    def _overrides(self) -> CampaignVariant:
        fields = ServerProfile.model_fields
        for key in self.model_extra or {}:
            if key not in fields:
                raise ValueError(f"{key!r} is not a launch profile field"
                                 + did_you_mean(key, [*type(self).model_fields, *fields]))
        return self

    @property
    def overrides(self) -> dict[str, object]:
        return dict(self.model_extra or {})


class CanaryConfig(_Model):
    """The accuracy canary (agent/bench/canary.py): ~100 exact-answer items per variant at
    temperature 0, scored as a share correct against the baseline variant's."""

    enabled: bool = Field(True, description="Run it (``canary = true`` is the same).")
    file: str | None = Field(None, description="A JSONL on the host (prompt, and answer or "
                             "answer_regex per line) instead of the built-in set.")
    concurrency: int = Field(8, ge=1, le=256, description="Requests in flight.")
    max_tokens: int = Field(32, ge=1, description="Tokens per answer.")
    margin: float = Field(5.0, ge=0, le=100, description="A drop of more than this many "
                          "points of share correct against the baseline fails the gate.")
    on_drop: Literal["skip", "mark"] = Field(
        "mark", description="A failed gate: skip the variant's sweep, or run it and mark it.")

    def agent_spec(self) -> dict[str, object]:
        return self.model_dump()


class CampaignKernels(_Model):
    """``kernels = { level = 16 }``: a kernel capture per variant, after its first run's sweep,
    under a steady load of that level's C (agent/campaign/variant_kernels.py; docs/kernels.md).
    The other keys are the capture's settings (agent/kernels/settings.py's defaults)."""

    level: int = Field(..., ge=1, description="The sweep level (its C) the capture's steady "
                       "load runs at: one of the campaign's sweep levels.")
    steps: int = _agent_field(capture_settings.FIELDS["steps"],
                              description="Forward steps profiled (SGLang's num_steps).")
    warmup: float = _agent_field(capture_settings.FIELDS["warmup"],
                                 description="Seconds of load at least, before profiling.")
    ramp_timeout: float = _agent_field(
        capture_settings.FIELDS["ramp_timeout"], description="Wait at most this long for the "
        "server's batch to reach C; then capture anyway, flagged.")
    output_len: int = _agent_field(capture_settings.FIELDS["output_len"],
                                   description="Tokens per load request (long: decode).")
    timeout: float = _agent_field(capture_settings.FIELDS["timeout"],
                                  description="Give up when no trace appeared by then (s).")
    top: int = _agent_field(capture_settings.FIELDS["top"], description="Kernels kept.")
    output_dir: str | None = Field(None, min_length=1, description="Where SGLang writes the "
                                   "traces on the host, a folder per run (default: the "
                                   "campaign's directory in the agent cache).")

    def problem(self, plan: SweepPlan) -> str | None:
        """What is wrong with this capture for the campaign's sweep ``plan`` (its level not
        one of the sweep's), in the agent's words; None when it can run."""
        try:
            variant_kernels.check(self.agent_spec(), plan.model_dump(mode="json"))
        except ValueError as exc:
            return str(exc)
        return None

    def agent_spec(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


class CampaignConfig(_Model):
    """Ordered variants of a launch profile on one host: restart -> sanity -> sweep each."""

    host: str = Field(..., min_length=1, description="The host the campaign runs on.")
    profile: str | None = Field(None, description="The base launch profile (default: the "
                                "host's default profile).")
    repeats: int = Field(1, ge=1, le=100, description="Each variant's sweep this many times, "
                         "each on a freshly restarted server (verdicts need 2 or more).")
    order: Literal["interleaved", "blocked", "random"] = Field(
        "interleaved", description="The order of the repeats: interleaved (A1 B1 A2 B2 ...), "
        "blocked (A1 A2 B1 B2 ...) or random (each round of variants shuffled, seeded).")
    seed: int = Field(0, description="The seed of order = \"random\".")
    on_failure: Literal["skip", "stop", "retry-suggested"] = Field(
        "skip", description="A failed variant: skip to the next, or stop the campaign; "
        "retry-suggested: a failed start is tried once more with its suggested next move "
        "(one flag: CUDA-graph batch size, --mem-fraction-static, --chunked-prefill-size, "
        "--dist-timeout), both attempts recorded, then skipped if it fails again.")
    sweep: dict[str, object] = Field(
        default_factory=dict, description="SweepPlan fields; [sweep] fills the rest.")
    sanity: list[SanityCase] | None = Field(
        None, description="The sanity suite (default: the config's [sanity]).")
    stop_server: bool = Field(False, description="Stop the server when the campaign ends.")
    canary: CanaryConfig | None = Field(
        None, description="The accuracy canary per variant (true, or a table; default off).")
    kernels: CampaignKernels | None = Field(
        None, description="A kernel capture per variant at one sweep level "
        "(``{ level = 16 }``; default none).")
    variants: list[CampaignVariant] = Field(..., min_length=1)

    @field_validator("canary", mode="before")
    @classmethod
    def _canary(cls, v: object) -> object:
        if v is True:
            return CanaryConfig()
        if v is False:
            return None
        return v

    @field_validator("variants")
    @classmethod
    def _unique(cls, v: list[CampaignVariant]) -> list[CampaignVariant]:
        names = [x.name for x in v]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"variant names must be unique: {', '.join(dupes)}")
        return v

    def plan(self, base: SweepPlan) -> SweepPlan:
        """The campaign's sweep plan: its ``sweep`` table over the config's [sweep]."""
        return SweepPlan.model_validate({**base.model_dump(), **self.sweep})


class TelemetrySettings(_Model):
    interval_s: float = Field(1.0, ge=0.2)


class Settings(_Model):
    """The whole config file."""

    hosts: dict[str, HostConfig] = Field(default_factory=dict)
    theme: str = Field("dark", description="dark, light, high-contrast or a Textual theme")
    keymap: dict[str, str] = Field(default_factory=dict, description="binding id -> keys "
                                   "(`dsv4tui connect` ?: every binding id)")
    sanity: SanitySettings = Field(default_factory=SanitySettings)
    sweep: SweepPlan = Field(default_factory=SweepPlan)
    telemetry: TelemetrySettings = Field(default_factory=TelemetrySettings)
    campaigns: dict[str, CampaignConfig] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _campaign_plans(self) -> Settings:
        for name, camp in self.campaigns.items():
            try:
                plan = camp.plan(self.sweep)
            except ValidationError as exc:
                raise ValueError("; ".join(f"campaigns.{name}.sweep.{line}"
                                           for line in error_lines(exc, SweepPlan))) from None
            problem = camp.kernels.problem(plan) if camp.kernels is not None else None
            if problem is not None:
                raise ValueError(f"campaigns.{name}.{problem}")
        return self

    @field_validator("theme")
    @classmethod
    def _theme(cls, v: str) -> str:
        return theme_names.check_theme(v)

    @field_validator("keymap")
    @classmethod
    def _keymap(cls, v: dict[str, str]) -> dict[str, str]:
        problems = actions.keymap_problems(v)
        if problems:
            binding_id, why = problems[0]
            raise PydanticCustomError("config_key", "{why}", {"key": binding_id, "why": why})
        return v

    @field_validator("hosts")
    @classmethod
    def _reserved(cls, v: dict[str, HostConfig]) -> dict[str, HostConfig]:
        for name in v:
            if name in (DEMO, DEMO_PAIR, *DEMO_NODES):
                raise ValueError(f"{name!r} is a built-in host name")
        return v

    @model_validator(mode="after")
    def _nodes_known(self) -> Settings:
        """Every node of a host made of nodes is a host of its own (not another group),
        and its known GPU count fits the profiles' tp/ep sizes."""
        groups = {k: h for k, h in self.hosts.items() if h.nodes}
        if not groups:
            return self
        from dsv4tui.core.hosts.ssh_target import ssh_config_aliases

        aliases = set(ssh_config_aliases())
        for name, host in groups.items():
            assert host.nodes is not None
            for node in host.nodes:
                if node in groups:
                    raise PydanticCustomError(
                        "config_key", "{why}", {"key": f"hosts.{name}.nodes", "why": f"node {node!r} is "
                                                "itself a host made of nodes"})
                if node not in self.hosts and node != LOCAL and node not in aliases:
                    raise PydanticCustomError(
                        "config_key", "{why}", {"key": f"hosts.{name}.nodes", "why": f"unknown node "
                                                f"{node!r}: not a [hosts] name, local or an "
                                                "alias in ~/.ssh/config"})
                gpus = self.hosts[node].gpus if node in self.hosts else None
                for pname, prof in host.profiles.items():
                    n = len(host.nodes)
                    for field in ("tp_size", "ep_size"):
                        size = getattr(prof, field)
                        if size is not None and gpus is not None and size // n > gpus:
                            raise PydanticCustomError(
                                "config_key", "{why}", {"key": f"hosts.{name}.nodes", "why": (
                                    f"profiles.{pname}.{field} = {size} needs {size // n} GPUs "
                                    f"on each node; {node} has {gpus}")})
        return self


def _not_none(kind: Any) -> Any:
    """``X`` of ``X | None``."""
    while get_origin(kind) in (Union, UnionType):
        kind = next((a for a in get_args(kind) if a is not type(None)), None)
    return kind


def _table_model(loc: Sequence[int | str], root: type[BaseModel]) -> type[BaseModel] | None:
    """The model whose table ``loc`` is in the file (``hosts.ct200.profiles.nvfp4`` ->
    ServerProfile), or None when ``loc`` is not a table of one."""
    kind: Any = root
    for part in loc:
        kind = _not_none(kind)
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            field = kind.model_fields.get(str(part))
            if field is None:
                return None
            kind = field.annotation
        elif get_origin(kind) is dict:
            kind = get_args(kind)[1]
        elif get_origin(kind) is list:
            kind = get_args(kind)[0]
        else:
            return None
    kind = _not_none(kind)
    return kind if isinstance(kind, type) and issubclass(kind, BaseModel) else None


_OURS = ("value_error", "config_key", "assertion_error")  # our validators name the value


def error_lines(exc: ValidationError, root: type[BaseModel] | None = None) -> list[str]:
    """Each problem ``exc`` found (validating ``root``, default Settings), as ``key.path:
    what is wrong`` in the file's words."""
    out = []
    for err in exc.errors():
        parts = [str(p) for p in err["loc"]]
        if err["type"] == "config_key":  # the error is about one key of a table (keymap.restart)
            parts.append(str((err.get("ctx") or {}).get("key")))
        if err["type"] == "extra_forbidden":
            model = _table_model(err["loc"][:-1], root or Settings)
            msg = "unknown key" + did_you_mean(
                parts[-1], list(model.model_fields) if model is not None else [])
        elif err["type"] == "missing":
            msg = "missing (required)"
        else:
            msg = err["msg"].removeprefix("Value error, ")
            given = err.get("input")
            if err["type"] not in _OURS and isinstance(given, str | int | float | bool):
                msg += f" (got {given!r})"  # pydantic's own words do not say what was there
        loc = ".".join(parts)
        out.append(f"{loc + ': ' if loc else ''}{msg}")
    return out


def format_error(path: Path, exc: ValidationError) -> str:
    """One line naming the file and every problem in it."""
    return f"config error in {path}: {'; '.join(error_lines(exc))}"


def load(path: Path | None = None) -> tuple[Settings, Path]:
    """Load settings from ``path``, else ``DSV4TUI_CONFIG``, else the default file; only the
    default file may be missing (defaults apply). Raises ConfigError on any problem."""
    path, source = paths.config_choice(path)
    if not path.exists():
        if source == "default":
            return Settings(), path
        raise ConfigError(f"config file not found: {path} (named by {source}; an empty file "
                          "is a valid config)")
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config error in {path}: not valid TOML: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"config error in {path}: cannot read: {exc.strerror}") from None
    try:
        return Settings.model_validate(raw), path
    except ValidationError as exc:
        raise ConfigError(format_error(path, exc)) from None
