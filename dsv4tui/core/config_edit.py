"""Edits of the config file that keep the rest of it as it was: comments, order, formatting
(tomlkit round-trips the TOML). Each edit is validated before the file is touched: the new
text must load as a valid config and differ from the old one only where the edit says, and it
replaces the file atomically (same permissions). One-line ConfigError otherwise.
"""

from __future__ import annotations

import os
import tempfile
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tomlkit
from pydantic import ValidationError
from tomlkit.items import Table

from dsv4tui.core.config import Settings, format_error
from dsv4tui.core.errors import ConfigError


def _table(parent: Any, key: str, *, header: bool = True) -> Any:
    """``parent[key]`` as a table, created when missing (with its own ``[a.b]`` header, or
    without one -- a super table -- when it only holds tables)."""
    if key not in parent:
        parent[key] = tomlkit.table(is_super_table=not header)
    value = parent[key]
    if not isinstance(value, Mapping):
        raise ConfigError(f"config: {key!r} is not a table")
    return value


def _toml_value(value: Any) -> Any:
    if isinstance(value, Mapping):
        inline = tomlkit.inline_table()
        for k, v in value.items():
            inline[k] = v
        return inline
    if isinstance(value, (list, tuple)):
        arr = tomlkit.array()
        arr.extend(value)
        if len(value) > 4:
            arr.multiline(True)
        return arr
    return value


def profile_table(data: Mapping[str, Any], comment: str | None = None) -> Table:
    """A ``[hosts.H.profiles.P]`` table for a profile's fields (None values left out)."""
    table = tomlkit.table()
    if comment:
        table.comment(comment)
    for key, value in data.items():
        if value is not None:
            table[key] = _toml_value(value)
    table.add(tomlkit.nl())  # a blank line before whatever follows it
    return table


def render_profile(host: str, name: str, data: Mapping[str, Any]) -> str:
    """The TOML of one profile as :func:`set_profile` writes it (for showing)."""
    doc = tomlkit.document()
    doc.add("hosts", tomlkit.table(is_super_table=True))
    hosts = doc["hosts"]
    hosts.add(host, tomlkit.table(is_super_table=True))  # type: ignore[union-attr]
    hosts[host].add("profiles", tomlkit.table(is_super_table=True))  # type: ignore[index]
    hosts[host]["profiles"][name] = profile_table(data)  # type: ignore[index]
    return tomlkit.dumps(doc).strip() + "\n"


def updated_text(text: str, host: str, name: str, data: Mapping[str, Any], *,
                 make_default: bool = False, comment: str | None = None) -> str:
    """``text`` (a config file) with profile ``name`` of ``host`` set to ``data`` (replacing
    one of that name), and the host's default_profile set to it when ``make_default``."""
    try:
        doc = tomlkit.parse(text)
    except tomlkit.exceptions.TOMLKitError as exc:
        raise ConfigError(f"config: not valid TOML: {exc}") from None
    hosts = _table(doc, "hosts", header=False)
    host_t = _table(hosts, host, header=make_default)
    if make_default:
        if isinstance(host_t, Table) and host_t.is_super_table():
            # an implicit [hosts.H] gets its own header now; tomlkit would give it the
            # comment of the first [hosts.H.x] header under it (that one keeps its own)
            host_t.trivia.comment = host_t.trivia.comment_ws = ""
        host_t["default_profile"] = name
    profiles = _table(host_t, "profiles", header=False)
    profiles[name] = profile_table(data, comment)
    return tomlkit.dumps(doc)


def _check(path: Path, old: str, new: str, host: str, name: str) -> Settings:
    """The new text loads as a valid config, and only ``host``'s profile ``name`` and its
    default_profile changed."""
    try:
        after_raw = tomllib.loads(new)
    except tomllib.TOMLDecodeError as exc:  # pragma: no cover - tomlkit wrote it
        raise ConfigError(f"config error in {path}: the edit would not be valid TOML: {exc}") \
            from None
    try:
        settings = Settings.model_validate(after_raw)
    except ValidationError as exc:
        raise ConfigError(format_error(path, exc).replace("config error in", "not written: "
                                                            "the edit of", 1)) from None
    before_raw = tomllib.loads(old) if old.strip() else {}

    def strip(raw: dict[str, Any]) -> dict[str, Any]:
        raw = {k: v for k, v in raw.items()}
        hosts = dict(raw.get("hosts") or {})
        h = dict(hosts.get(host) or {})
        h.pop("default_profile", None)
        profiles = dict(h.get("profiles") or {})
        profiles.pop(name, None)
        if profiles:
            h["profiles"] = profiles
        else:
            h.pop("profiles", None)
        if h:
            hosts[host] = h
        else:
            hosts.pop(host, None)
        if hosts:
            raw["hosts"] = hosts
        else:
            raw.pop("hosts", None)
        return raw

    if strip(after_raw) != strip(before_raw):  # pragma: no cover - a tomlkit bug would show
        raise ConfigError(f"not written: editing {path} would change more than profile "
                          f"{name!r} of {host!r}")
    return settings


def set_profile(path: Path, host: str, name: str, data: Mapping[str, Any], *,
                make_default: bool = False, comment: str | None = None,
                dry_run: bool = False) -> tuple[str, Settings]:
    """Write profile ``name`` of ``host`` into the config file at ``path`` (created when
    missing), keeping everything else; ``(new text, the settings it loads as)``. With
    ``dry_run`` nothing is written (the checks still run)."""
    try:
        old = path.read_text(encoding="utf-8") if path.exists() else ""
    except OSError as exc:
        raise ConfigError(f"config error in {path}: cannot read: {exc.strerror}") from None
    new = updated_text(old, host, name, data, make_default=make_default, comment=comment)
    settings = _check(path, old, new, host, name)
    if not dry_run:
        _write_atomic(path, new)
    return new, settings


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o600
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=str(path.parent))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise ConfigError(f"cannot write {path}: {exc.strerror or exc}") from None
