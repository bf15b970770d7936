"""``bench reach``: does the server answer HTTP, from this host? One TCP connection (TLS for
``https``), then one ``GET /v1/models`` (under the URL's path prefix) and its status line.

Any HTTP answer counts, whatever its status (a 404 from a server that is not OpenAI-like,
a 401 without the key, a 500): that is a server, and what its requests get is the sweep's to
measure. What does not count: a connection refused or timed out, and one the server accepts
but never answers within ``answer_timeout`` (a hung server, or no HTTP server at all). The
console asks this before a ``sweep --url``: nothing there to measure, no run to store.

Python >= 3.9, stdlib only.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import ssl
from typing import Any, Dict

from dsv4tui.agent.bench.openai_stream import Endpoint

_STATUS_LINE = re.compile(rb"^HTTP/\d(?:\.\d)? (\d{3})")


def _printable(raw: bytes, limit: int = 40) -> str:
    text = raw[:limit].decode("ascii", "replace")
    return "".join(c if " " <= c <= "~" else "?" for c in text)


async def probe(endpoint: Endpoint, connect_timeout: float = 3.0,
                answer_timeout: float = 10.0) -> Dict[str, Any]:
    """``{url, reachable, connected, answered, status, error}``: ``reachable`` when the
    server answered HTTP (``status``: its status code); ``connected`` when the connection
    opened; ``error``: why it is not reachable, in words."""
    out: Dict[str, Any] = {"url": endpoint.base, "reachable": False, "connected": False,
                           "answered": False, "status": None, "error": None}
    tls = ssl.create_default_context() if endpoint.scheme == "https" else None
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(endpoint.host, endpoint.port, ssl=tls), connect_timeout)
    except asyncio.TimeoutError:
        out["error"] = "cannot connect to %s: timed out" % endpoint.base
        return out
    except ssl.SSLError as exc:
        out["error"] = "cannot connect to %s: TLS failed: %s" % (
            endpoint.base, exc.reason or exc)
        return out
    except OSError as exc:
        why = os.strerror(exc.errno) if exc.errno else (str(exc) or type(exc).__name__)
        out["error"] = "cannot connect to %s: %s" % (endpoint.base, why)
        return out
    out["connected"] = True
    try:
        writer.write(("GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: dsv4tui-agent\r\n"
                      "Accept: */*\r\nConnection: close\r\n\r\n"
                      % (endpoint.path("/v1/models"), endpoint.netloc)).encode("ascii"))
        line = await asyncio.wait_for(_status_line(reader, writer), answer_timeout)
    except asyncio.TimeoutError:
        out["error"] = ("%s accepted the connection but did not answer HTTP within %g s"
                        % (endpoint.base, answer_timeout))
        return out
    except ConnectionError as exc:  # reset: it hung up without reading what we sent
        out["error"] = ("%s accepted the connection but closed it without an HTTP answer "
                        "(%s)" % (endpoint.base, exc.strerror or type(exc).__name__))
        return out
    except (OSError, ValueError) as exc:  # a TLS failure, a line over the reader's limit
        out["error"] = ("%s accepted the connection but did not answer HTTP (%s)"
                        % (endpoint.base, str(exc) or type(exc).__name__))
        return out
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(writer.wait_closed(), 1.0)
    if not line:
        out["error"] = ("%s accepted the connection but closed it without an HTTP answer"
                        % endpoint.base)
        return out
    m = _STATUS_LINE.match(line)
    if m is None:
        out["error"] = ("%s accepted the connection but its answer is not HTTP (it began %r)"
                        % (endpoint.base, _printable(line)))
        return out
    out.update(reachable=True, answered=True, status=int(m.group(1)))
    return out


async def _status_line(reader: asyncio.StreamReader, writer: asyncio.StreamWriter
                       ) -> bytes:
    await writer.drain()
    return await reader.readline()
