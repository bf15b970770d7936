"""The simulator's multi-node rendezvous: ``--nnodes N --node-rank i --dist-init-addr H:P``.

Like torch.distributed's TCPStore under SGLang: rank 0 listens on the init address (every
interface, as the store does) and waits until the other N-1 ranks have connected; the others
connect to it (retrying while it is not up yet). Both sides give up after ``--dist-timeout``
(torch's wording). After the rendezvous the connections stay open as the simulated NCCL
communicator: a peer whose socket closes without saying goodbye makes this rank fail the way
NCCL does (``ncclRemoteError``), within a second; a peer that says ``bye`` (SIGTERM: the group
is being stopped) makes this rank drain and exit too. Rank 0 sends its running-request count
to the others every half second, so every node's simulated GPUs carry the load.

The wire format (lines): ``rank K`` (K -> 0), ``go`` (0 -> K, everyone joined),
``load R`` (0 -> K), ``bye`` (either way).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dsv4tui.sim.runtime import SimServer

_SITE = "/opt/sglang/python/sglang/srt"
_TORCH = "/opt/venv/lib/python3.12/site-packages/torch/distributed"
DEFAULT_TIMEOUT_S = 300.0  # torch's default store timeout, scaled by --sim-speed
_LOAD_INTERVAL_S = 0.5
_CONNECT_RETRY_S = 0.1


def parse_addr(addr: str) -> tuple[str, int]:
    """``host:port`` / ``[v6]:port`` -> (host, port); ValueError when it is not one."""
    host, sep, port = addr.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ValueError(f"--dist-init-addr {addr!r} is not HOST:PORT")
    return host.strip("[]"), int(port)


class Rendezvous:
    """One rank's side of the rendezvous and of the simulated communicator."""

    def __init__(self, sim: SimServer, addr: str, nnodes: int, rank: int,
                 timeout_s: float) -> None:
        self.sim = sim
        self.host, self.port = parse_addr(addr)
        self.nnodes, self.rank = nnodes, rank
        self.timeout_s = timeout_s
        self.peers: dict[int, tuple[asyncio.StreamReader, asyncio.StreamWriter]] = {}
        self._server: asyncio.Server | None = None
        self._all_joined = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self.leaving = False
        self.on_bye: Callable[[int], None] | None = None

    # -- joining -----------------------------------------------------------------------------

    async def join(self) -> None:
        """Rendezvous with every rank; exits the process (SGLang-style lines) on failure."""
        if self.rank == 0:
            await self._serve()
        else:
            await self._connect()

    async def _serve(self) -> None:
        try:
            self._server = await asyncio.start_server(self._accept, host=None, port=self.port,
                                                      reuse_address=True)
        except OSError as exc:
            name = errno.errorcode.get(exc.errno or 0, "UNKNOWN")
            self._fail_init([
                f'  File "{_TORCH}/rendezvous.py", line 189, in _create_c10d_store',
                "    return TCPStore(",
                f"torch.distributed.DistNetworkError: The server socket has failed to listen on "
                f"any local network address. port: {self.port}, useIpv6: 0, code: "
                f"-{exc.errno or 0}, name: {name}, message: "
                f"{(exc.strerror or str(exc)).lower()}"])
        try:
            await asyncio.wait_for(self._all_joined.wait(), self.timeout_s)
        except TimeoutError:
            joined = len(self.peers) + 1
            self._fail_init([
                f'  File "{_TORCH}/rendezvous.py", line 189, in _create_c10d_store',
                "    return TCPStore(",
                f"torch.distributed.DistStoreError: Timed out after {self.timeout_s:.0f} seconds "
                f"waiting for clients. {joined}/{self.nnodes} clients joined."])
        for _, writer in self.peers.values():
            writer.write(b"go\n")
        for rank in sorted(self.peers):
            self._watch(rank)
        self._spawn(self._send_load())

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = (await asyncio.wait_for(reader.readline(), 10.0)).decode().split()
        except (TimeoutError, OSError, UnicodeDecodeError):
            writer.close()
            return
        if len(line) != 2 or line[0] != "rank" or not line[1].isdigit():
            writer.close()
            return
        rank = int(line[1])
        if not 0 < rank < self.nnodes or rank in self.peers or self._all_joined.is_set():
            writer.close()
            return
        self.peers[rank] = (reader, writer)
        self.sim.log.info(f"Node rank {rank} joined the rendezvous at {self.host}:{self.port} "
                          f"({len(self.peers) + 1}/{self.nnodes}).", self.sim.first_tp_rank)
        if len(self.peers) == self.nnodes - 1:
            self._all_joined.set()

    async def _connect(self) -> None:
        deadline = time.monotonic() + self.timeout_s
        last: OSError | None = None
        while True:
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(self.host, self.port), max(deadline - time.monotonic(),
                                                                       0.1))
                break
            except (OSError, TimeoutError) as exc:
                last = exc if isinstance(exc, OSError) else last
            if time.monotonic() >= deadline:
                why = (last.strerror or str(last)) if last else "timed out"
                self._fail_init([
                    f'  File "{_TORCH}/rendezvous.py", line 189, in _create_c10d_store',
                    "    return TCPStore(",
                    f"torch.distributed.DistNetworkError: The client socket has timed out after "
                    f"{self.timeout_s:.0f}s while trying to connect to ({self.host}, {self.port})"
                    f". ({why})"])
            await asyncio.sleep(_CONNECT_RETRY_S)
        writer.write(f"rank {self.rank}\n".encode())
        try:
            line = await asyncio.wait_for(reader.readline(), max(deadline - time.monotonic(), 0.1))
        except (TimeoutError, OSError):
            line = b""
        if line.strip() != b"go":
            self._fail_init([
                f'  File "{_TORCH}/rendezvous.py", line 189, in _create_c10d_store',
                "    return TCPStore(",
                f"torch.distributed.DistStoreError: Timed out after {self.timeout_s:.0f} seconds "
                f"waiting for the store at ({self.host}, {self.port}): node rank 0 did not "
                "finish the rendezvous."])
        self.peers[0] = (reader, writer)
        self._watch(0)

    def _fail_init(self, lines: list[str]) -> None:
        self.sim.crash([f'  File "{_SITE}/model_executor/model_runner.py", line 598, in '
                        "init_torch_distributed",
                        "    init_distributed_environment(",
                        f'  File "{_SITE}/distributed/parallel_state.py", line 1432, in '
                        "init_distributed_environment",
                        "    torch.distributed.init_process_group(", *lines],
                       rank=self.sim.first_tp_rank)

    # -- the communicator --------------------------------------------------------------------

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _watch(self, rank: int) -> None:
        self._spawn(self._read_peer(rank))

    async def _read_peer(self, rank: int) -> None:
        reader, _ = self.peers[rank]
        while True:
            try:
                line = await reader.readline()
            except OSError:
                line = b""
            if not line:
                break
            words = line.decode(errors="replace").split()
            if words[:1] == ["load"] and len(words) == 2 and words[1].isdigit():
                self.sim.peer_running = int(words[1])
            elif words[:1] == ["bye"]:
                self.peers.pop(rank, None)
                if not self.leaving and self.on_bye is not None:
                    self.on_bye(rank)
                return
        self.peers.pop(rank, None)
        if not self.leaving:
            self._peer_lost(rank)

    def _peer_lost(self, rank: int) -> None:
        """A peer vanished without a goodbye: NCCL's remote error, then the scheduler dies."""
        sim = self.sim
        tp = sim.first_tp_rank
        stamp = time.strftime("%m%d %H:%M:%S")
        sim.log.plain(f"[rank{tp}]:[E{stamp}.000000 ProcessGroupNCCL.cpp:1895] [PG ID 0 PG GUID "
                      f"0(default_pg) Rank {tp}] Process group watchdog thread terminated with "
                      "exception: NCCL error: remote process exited or there was a network "
                      "error, NCCL version 2.27.3")
        sim.log.plain("ncclRemoteError: A call failed possibly due to a network error or a "
                      "remote process exiting prematurely.")
        sim.log.plain(f"Last error: socketProgress: Connection closed by remote peer "
                      f"{self.host}<{self.port}> (node rank {rank})")
        if sim.faults.nccl_hang:  # as NCCL without async error handling: wait in the collective
            return
        sim.crash([f'  File "{_SITE}/managers/scheduler.py", line 1187, in event_loop_overlap',
                   "    batch_result = self.run_batch(batch)",
                   f'  File "{_SITE}/distributed/device_communicators/pynccl.py", line 152, in '
                   "all_reduce",
                   "    self.nccl.ncclAllReduce(",
                   "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/"
                   "distributed/c10d/ProcessGroupNCCL.cpp:3356, remote process exited or there "
                   "was a network error, NCCL version 2.27.3",
                   "ncclRemoteError: A call failed possibly due to a network error or a remote "
                   "process exiting prematurely."], rank=tp)

    async def _send_load(self) -> None:
        while not self.leaving:
            eng = self.sim.engine
            running = eng.num_running if eng is not None else 0
            for _, writer in list(self.peers.values()):
                with contextlib.suppress(OSError, RuntimeError):
                    writer.write(f"load {running}\n".encode())
            await asyncio.sleep(_LOAD_INTERVAL_S)

    async def leave(self) -> None:
        """Say goodbye to every peer (a coordinated stop), then close."""
        self.leaving = True
        for _, writer in list(self.peers.values()):
            with contextlib.suppress(OSError, RuntimeError, TimeoutError):
                writer.write(b"bye\n")
                await asyncio.wait_for(writer.drain(), 1.0)
        if self._server is not None:
            self._server.close()
