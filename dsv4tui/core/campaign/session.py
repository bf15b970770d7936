"""Campaigns on a host: the calls the CLI and the dashboard both make.

``start`` hands the host runner its spec and returns the campaign id; ``attach`` streams the
journal into the store (:mod:`ingest`) until the campaign ends; ``follow_to_end`` does that
across link drops (reconnecting through whatever ``connect`` gives, e.g. a HostSupervisor);
``status``, ``listing``, ``cancel`` and ``resume`` are one agent call each, with the store's run
ids filled in.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from dsv4tui.core.campaign.ingest import Collected, Collector, EventCallback, collect
from dsv4tui.core.errors import AgentFailed, ConnectError
from dsv4tui.core.hosts.deploy import REMOTE_DIR
from dsv4tui.core.store import RunStore
from dsv4tui.core.store import campaigns as cstore


def event_of(events: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    for ev in events:
        if ev.get("type") == kind:
            return {k: v for k, v in ev.items() if k not in ("type", "v")}
    raise AgentFailed("campaign", f"the agent sent no {kind} event")


async def start(host: Any, spec: Mapping[str, Any], store: RunStore | None = None
                ) -> dict[str, Any]:
    """Start the runner on ``host``; the ``campaign_started`` fields (``id``, ``pid``).

    The spec travels as a file (uploaded over SFTP to the agent's directory on an SSH host),
    never on a command line: no length limit, and nothing of it in ``ps`` on the host."""
    with tempfile.TemporaryDirectory(prefix="dsv4tui-spec-") as tmp:
        local = Path(tmp) / f"spec-{secrets.token_hex(6)}.json"
        local.write_text(json.dumps(dict(spec), separators=(",", ":")), encoding="utf-8")
        if host.session.is_local:
            remote = str(local)
        else:
            remote = f"{REMOTE_DIR}/{local.name}"
            await host.session.upload(local, remote)
        events = await host.agent.call("campaign", "start", "--spec-json", "@" + remote,
                                       "--remove-spec", timeout=120.0)
    started = event_of(events, "campaign_started")
    if store is not None:
        await asyncio.to_thread(cstore.ensure, store, str(started["id"]), host=host.name,
                                name=str(spec.get("name") or started["id"]),
                                kind=str(spec.get("kind") or "campaign"), spec=spec)
    return started


async def attach(host: Any, store: RunStore, cid: str, *, follow: bool = True,
                 on_event: EventCallback | None = None, gpu_names: list[str] | None = None
                 ) -> Collected:
    """Collect the campaign's journal into ``store`` (to its end, or with ``follow=False``
    to what the host has now). ConnectError when the link drops: attach again later."""
    collector = await asyncio.to_thread(Collector, store, host.name, cid,
                                        gpu_names=gpu_names or [], simulated=host.simulated)
    spec = getattr(host, "spec", None)
    if not (follow and spec is not None and spec.group):
        return await collect(host.agent, collector, follow=follow, on_event=on_event)
    from dsv4tui.core.nodes.gpus import NodeGpuSampler  # a host made of nodes: every node's GPUs

    sampler = NodeGpuSampler(host)
    collector.extra_gpus = sampler.summary
    await sampler.start()
    try:
        return await collect(host.agent, collector, follow=follow, on_event=on_event)
    finally:
        await sampler.stop()


async def follow_to_end(connect: Callable[[], Awaitable[Any]], store: RunStore, cid: str, *,
                        on_event: EventCallback | None = None,
                        on_link: Callable[[str], None] | None = None,
                        gpu_names: list[str] | None = None) -> Collected:
    """:func:`attach` until the campaign ends, reconnecting after every link drop. Listeners
    get each journal event once: after a reconnect the journal is read again from the offset
    the store holds, and what they were told already is not told again."""
    told = -1

    def once(ev: dict[str, Any]) -> None:
        nonlocal told
        seq = ev.get("seq")
        if isinstance(seq, int):
            if seq <= told:
                return
            told = seq
        if on_event is not None:
            on_event(ev)

    while True:
        host = await connect()
        try:
            return await attach(host, store, cid, on_event=once, gpu_names=gpu_names)
        except ConnectError as exc:
            if on_link is not None:
                on_link(exc.message)


async def status(host: Any, store: RunStore, cid: str) -> dict[str, Any]:
    """The campaign's state on the host, after collecting what is missing; each variant with
    the store's ``run_id`` (its last run) and ``run_ids``."""
    await attach(host, store, cid, follow=False)
    info = event_of(await host.agent.call("campaign", "status", cid), "campaign")
    return with_run_ids(info, await asyncio.to_thread(cstore.run_ids, store, cid))


def with_run_ids(info: dict[str, Any], runs: Mapping[str, int]) -> dict[str, Any]:
    for v in info.get("variants") or []:
        ids = [runs[k] for k in v.get("runs") or [] if k in runs]
        v["run_ids"] = ids
        v["run_id"] = ids[-1] if ids else None
    return info


async def listing(host: Any, running: bool = False) -> list[dict[str, Any]]:
    events = await host.agent.call("campaign", "list", *(["--running"] if running else []))
    return [{k: v for k, v in ev.items() if k not in ("type", "v")} for ev in events
            if ev.get("type") == "campaign"]


async def cancel(host: Any, store: RunStore | None, cid: str, wait: float = 60.0
                 ) -> dict[str, Any]:
    """SIGTERM the runner; once it ended, what it finished is collected into ``store``."""
    out = event_of(await host.agent.call("campaign", "cancel", cid, "--wait", f"{wait:g}",
                                       timeout=wait + 30.0), "campaign_cancelled")
    if store is not None:
        await attach(host, store, cid, follow=False)
    return out


async def resume(host: Any, cid: str) -> dict[str, Any]:
    return event_of(await host.agent.call("campaign", "resume", cid, timeout=120.0),
                  "campaign_started")
