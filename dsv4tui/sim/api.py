"""The simulated server's HTTP API (Starlette): health, OpenAI endpoints, info, metrics, profile.

Shapes follow SGLang 0.5.2x: streaming chat starts with a role-only chunk (``content: ""``),
every delta carries ``reasoning_content: null``, ``stream_options.include_usage`` adds a last
chunk with ``choices: []`` and ``usage``, then ``data: [DONE]``.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import shlex
import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request as HttpRequest
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from dsv4tui.sim import answers
from dsv4tui.sim.engine import EngineClosed, Request
from dsv4tui.sim.runtime import VERSION, SimServer

_OPEN_PATHS = ("/health", "/health_generate", "/ready", "/metrics")
_DEFAULT_MAX_TOKENS = 2048


def _error(status: int, message: str, type_: str = "BadRequestError") -> JSONResponse:
    return JSONResponse({"object": "error", "message": message, "type": type_, "param": None,
                         "code": status}, status_code=status)


class _Guard:
    """Pure-ASGI middleware: API-key check and uvicorn-style access lines in the log."""

    def __init__(self, app: ASGIApp, sim: SimServer) -> None:
        self.app = app
        self.sim = sim

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        key = self.sim.args.api_key
        if key and not path.startswith(_OPEN_PATHS):
            headers = dict(scope.get("headers") or [])
            auth = headers.get(b"authorization", b"").decode("latin-1")
            if auth != f"Bearer {key}":
                await JSONResponse({"error": "Unauthorized"}, status_code=401)(scope, receive, send)
                self._access(scope, 401)
                return

        async def send_wrapper(message: Any) -> None:
            if message["type"] == "http.response.start" and path != "/metrics":
                self._access(scope, message["status"])  # uvicorn logs at response start
            await send(message)

        await self.app(scope, receive, send_wrapper)

    def _access(self, scope: Scope, code: int) -> None:
        client = scope.get("client") or ("127.0.0.1", 0)
        reason = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found",
                  500: "Internal Server Error", 503: "Service Unavailable"}.get(code, "")
        self.sim.log.http(f'{client[0]}:{client[1]} - "{scope["method"]} {scope["path"]} '
                          f'HTTP/{scope.get("http_version", "1.1")}" {code} {reason}'.rstrip())


def _prompt_of(messages: Any) -> tuple[str, int]:
    """(the last user message's text, prompt tokens of the whole conversation)."""
    if not isinstance(messages, list) or not messages:
        raise ValueError("messages must be a non-empty list")
    last_user = ""
    tokens = 2
    for msg in messages:
        if not isinstance(msg, dict):
            raise ValueError("each message must be an object")
        content = msg.get("content")
        if isinstance(content, list):
            content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        text = str(content or "")
        tokens += answers.count_tokens(text) + 4
        if msg.get("role") == "user":
            last_user = text
    return last_user, tokens


def _int(body: dict[str, Any], *names: str) -> int | None:
    for name in names:
        value = body.get(name)
        if value is not None:
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive integer")
            return value
    return None


class Api:
    def __init__(self, sim: SimServer) -> None:
        self.sim = sim

    @property
    def engine(self) -> Any:
        return self.sim.engine

    def _serving(self) -> bool:
        return self.sim.ready and not self.sim.draining

    # -- health / info -------------------------------------------------------------------------

    async def health(self, request: HttpRequest) -> Response:
        return Response(status_code=200 if self._serving() else 503)

    async def health_generate(self, request: HttpRequest) -> Response:
        if not self._serving():
            return Response(status_code=503)
        req = Request(prompt="health", prompt_tokens=1, max_tokens=1)
        try:
            self.engine.submit(req, external=False)
            async with asyncio.timeout(20):
                while await req.out.get() is not None:
                    pass
        except (EngineClosed, TimeoutError):
            return Response(status_code=503)
        return Response(status_code=200)

    async def models(self, request: HttpRequest) -> Response:
        name = self.sim.served_name
        return JSONResponse({"object": "list", "data": [{
            "id": name, "object": "model", "created": int(self.sim.started), "owned_by": "sglang",
            "root": name, "parent": None, "max_model_len": self.sim.context_len}]})

    async def server_info(self, request: HttpRequest) -> Response:
        sim = self.sim
        args = {k: v for k, v in vars(sim.args).items() if not k.startswith("sim_")}
        if args.get("api_key"):
            args["api_key"] = "***"
        args.update(served_model_name=sim.served_name, mem_fraction_static=sim.mem_fraction,
                    moe_runner_backend=sim.args.moe_runner_backend,
                    attention_backend=sim.args.attention_backend or ("dsv4" if sim.is_dsv4 else
                                                                     "flashinfer"),
                    max_running_requests=sim.max_running, context_length=sim.context_len)
        launch = [a if prev != "--api-key" else "***"
                  for prev, a in zip(["", *sim.argv], sim.argv, strict=False)]
        eng = self.engine
        return JSONResponse({
            **args, "version": VERSION,
            "launch_command": shlex.join(["python3", "-m", "sglang.launch_server", *launch]),
            "status": "ready" if self._serving() else "starting" if not sim.draining else "draining",
            "max_total_num_tokens": sim.max_total_tokens,
            "internal_states": [{
                "last_gen_throughput": eng.last_gen_throughput if eng else 0.0,
                "#running-req": eng.num_running if eng else 0,
                "#queue-req": len(eng.waiting) if eng else 0,
                "memory_usage": {"weight": round(sim.weights_gb, 2), "kvcache": round(sim.kv_gb, 2),
                                 "graph": 0.66, "token_capacity": sim.max_total_tokens},
                "avg_spec_accept_length": eng.last_spec_accept_length if eng else None}],
            "simulated": {"gpu": sim.gpu.name, "checkpoint": sim.checkpoint,
                          "backend": sim.backend, "faults": sim.args.sim_fault,
                          "run_factor": round(sim.run_factor, 4),
                          "wrong_rate": sim.wrong_rate},
        })

    async def model_info(self, request: HttpRequest) -> Response:
        sim = self.sim
        return JSONResponse({
            "model_path": sim.args.model_path,
            "tokenizer_path": sim.args.tokenizer_path or sim.args.model_path,
            "served_model_name": sim.served_name, "is_generation": True,
            "preferred_sampling_params": None, "weight_version": "default",
            "has_image_understanding": False, "has_audio_understanding": False,
            "model_type": "deepseek_v4" if sim.is_dsv4 else "llama",
            "architectures": [sim.architecture]})

    async def flush_cache(self, request: HttpRequest) -> Response:
        return PlainTextResponse("Cache flushed.\nPlease check backend logs for more details. "
                                 "(When there are running or waiting requests, the operation "
                                 "will not be performed.)\n")

    async def metrics(self, request: HttpRequest) -> Response:
        if not self.sim.args.enable_metrics:
            return PlainTextResponse("Not Found", status_code=404)
        return PlainTextResponse(self._prometheus(),
                                 media_type="text/plain; version=0.0.4; charset=utf-8")

    def _prometheus(self) -> str:
        eng, sim = self.engine, self.sim
        labels = (f'model_name="{sim.served_name}",engine_type="unified",tp_rank="0",'
                  f'pp_rank="0"')
        _, usage, _, swa_usage = eng.token_usage() if eng else (0, 0.0, 0, 0.0)
        gauges = {
            "num_running_reqs": eng.num_running if eng else 0,
            "num_queue_reqs": len(eng.waiting) if eng else 0,
            "gen_throughput": eng.last_gen_throughput if eng else 0.0,
            "token_usage": max(usage, swa_usage), "swa_token_usage": swa_usage,
            "cache_hit_rate": 0.0,
            "num_used_tokens": eng.token_usage()[0] if eng else 0,
        }
        lines: list[str] = []
        for name, value in gauges.items():
            lines += [f"# HELP sglang:{name} {name.replace('_', ' ')}",
                      f"# TYPE sglang:{name} gauge", f"sglang:{name}{{{labels}}} {float(value)}"]
        if eng:
            c = eng.counters
            for name, value in (("prompt_tokens_total", c.prompt_tokens),
                                ("generation_tokens_total", c.generation_tokens),
                                ("num_requests_total", c.requests),
                                ("num_aborted_requests_total", c.aborted)):
                lines += [f"# TYPE sglang:{name} counter",
                          f"sglang:{name}{{{labels}}} {float(value)}"]
            lines += c.ttft.prometheus("sglang:time_to_first_token_seconds", labels)
            lines += c.itl.prometheus("sglang:inter_token_latency_seconds", labels)
            lines += c.e2e.prometheus("sglang:e2e_request_latency_seconds", labels)
            lines += c.queue.prometheus("sglang:queue_time_seconds", labels)
        if eng and eng.spec_draft_tokens:  # what its speculative steps actually accepted
            lines += ["# TYPE sglang:spec_accept_length gauge",
                      f"sglang:spec_accept_length{{{labels}}} "
                      f"{eng.last_spec_accept_length or 0.0:.3f}"]
        if sim.phase_seconds:  # phase label values as shared/reference/sglang.md names them
            names = {"load_weights": "load_weight", "kv_cache": "kv_cache_allocation",
                     "cuda_graph": "cuda_graph_capture", "http_up": "http_server",
                     "warmup": "warmup"}
            lines.append("# TYPE sglang:startup_time_seconds gauge")
            for phase, seconds in sim.phase_seconds.items():
                lines.append(f'sglang:startup_time_seconds{{{labels},'
                             f'phase="{names.get(phase, phase)}"}} {seconds:.3f}')
        return "\n".join(lines) + "\n"

    # -- profiling -----------------------------------------------------------------------------

    async def start_profile(self, request: HttpRequest) -> Response:
        try:
            body = await request.json() if (await request.body()) else {}
        except ValueError:
            return _error(400, "request body is not JSON")
        if not isinstance(body, dict):
            return _error(400, "request body must be a JSON object")
        try:  # dsv4tui.sim.trace is written by another module owner; optional here
            trace = importlib.import_module("dsv4tui.sim.trace")
        except ImportError:
            return _error(500, "profiling is not available in this simulator build: "
                          "dsv4tui.sim.trace is missing", "InternalServerError")
        out_dir = body.get("output_dir") or os.environ.get("SGLANG_TORCH_PROFILER_DIR") or "/tmp"
        steps = body.get("num_steps")
        self.sim.profile = {"output_dir": str(out_dir), "num_steps": steps, "module": trace}
        if steps:
            await self._write_trace()
        return PlainTextResponse("Start profiling.\n")

    async def stop_profile(self, request: HttpRequest) -> Response:
        if self.sim.profile is None:
            return _error(400, "Profiling is not in progress. Call /start_profile first.")
        await self._write_trace()
        return PlainTextResponse("Stop profiling. This will take some time.\n")

    async def _write_trace(self) -> None:
        prof = self.sim.profile
        if prof is None:
            return
        self.sim.profile = None
        batch = await self._profiled_batch(int(prof["num_steps"] or 5))
        await asyncio.to_thread(
            prof["module"].write_trace, prof["output_dir"], self.sim.backend, self.sim.checkpoint,
            int(prof["num_steps"] or 5), tp_size=self.sim.args.tp_size, batch=batch,
            step_s=self.sim.speed.step_s(batch), gpu_name=self.sim.gpu.name)
        self.sim.log.info(f"Profiling done. Traces are saved to: {prof['output_dir']}")

    async def _profiled_batch(self, steps: int) -> int:
        """The batch the profiled steps ran: like SGLang, which records the next ``steps``
        forward passes, the trace's batch is the mean running batch over those steps' time
        (sampled each step), not a snapshot of the instant profiling started."""
        eng = self.engine
        if eng is None:
            return 1
        seen = [len(eng.running)]
        for _ in range(max(1, min(steps, 50)) - 1):
            await asyncio.sleep(self.sim.speed.step_s(max(seen[-1], 1)))
            seen.append(len(eng.running))
        return max(1, round(sum(seen) / len(seen)))

    # -- generation ----------------------------------------------------------------------------

    async def _body(self, request: HttpRequest) -> dict[str, Any]:
        try:
            body = await request.json()
        except ValueError:
            raise ValueError("request body is not valid JSON") from None
        if not isinstance(body, dict):
            raise ValueError("request body must be a JSON object")
        return body

    def _refuse(self) -> Response | None:
        if self.sim.faults.http_500:
            return _error(500, "Internal server error (simulated fault http-500)",
                          "InternalServerError")
        if self.sim.draining:
            return _error(503, "The server is shutting down.", "ServiceUnavailableError")
        if not self.sim.ready:
            return _error(503, "The server is not ready yet.", "ServiceUnavailableError")
        return None

    def _request(self, prompt: str, prompt_tokens: int, body: dict[str, Any],
                 max_tokens: int | None) -> Request:
        return Request(prompt=prompt, prompt_tokens=prompt_tokens,
                       max_tokens=max_tokens or _DEFAULT_MAX_TOKENS,
                       ignore_eos=bool(body.get("ignore_eos")), wrong=self.sim.faults.wrong_answer,
                       stall=self.sim.faults.stall, off_by_one=self.sim.off_by_one(prompt))

    async def chat(self, request: HttpRequest) -> Response:
        return await self._complete(request, chat=True)

    async def completions(self, request: HttpRequest) -> Response:
        return await self._complete(request, chat=False)

    async def _complete(self, request: HttpRequest, *, chat: bool) -> Response:
        refused = self._refuse()
        if refused is not None:
            return refused
        try:
            body = await self._body(request)
            if chat:
                prompt, ptoks = _prompt_of(body.get("messages"))
            else:
                raw = body.get("prompt")
                if isinstance(raw, list):
                    raw = " ".join(str(p) for p in raw)
                if not isinstance(raw, str) or not raw:
                    raise ValueError("prompt must be a non-empty string")
                prompt, ptoks = raw, answers.count_tokens(raw) + 1
            max_tokens = _int(body, "max_completion_tokens", "max_tokens")
        except ValueError as exc:
            return _error(400, str(exc))
        req = self._request(prompt, ptoks, body, max_tokens)
        try:
            self.engine.submit(req)
        except EngineClosed as exc:
            return _error(503, str(exc), "ServiceUnavailableError")
        model = str(body.get("model") or self.sim.served_name)
        if body.get("stream"):
            opts = body.get("stream_options") or {}
            usage = isinstance(opts, dict) and bool(opts.get("include_usage"))
            return StreamingResponse(self._stream(req, model, chat, usage),
                                     media_type="text/event-stream")
        try:
            text = await self._collect(req)
        finally:
            self.engine.abort(req)
        return JSONResponse(self._final(req, model, chat, text))

    async def _collect(self, req: Request) -> str:
        parts = []
        while (tok := await req.out.get()) is not None:
            parts.append(tok)
        return "".join(parts)

    def _usage(self, req: Request) -> dict[str, Any]:
        return {"prompt_tokens": req.prompt_tokens, "total_tokens": req.prompt_tokens + req.produced,
                "completion_tokens": req.produced, "prompt_tokens_details": None,
                "reasoning_tokens": 0}

    def _final(self, req: Request, model: str, chat: bool, text: str) -> dict[str, Any]:
        base = {"id": req.rid, "created": int(time.time()), "model": model,
                "usage": self._usage(req), "metadata": {"weight_version": "default"}}
        if chat:
            choice = {"index": 0, "message": {"role": "assistant", "content": text,
                                              "reasoning_content": None, "tool_calls": None},
                      "logprobs": None, "finish_reason": req.finish_reason,
                      "matched_stop": 1 if req.finish_reason == "stop" else None}
            return {**base, "object": "chat.completion", "choices": [choice]}
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": req.finish_reason,
                  "matched_stop": 1 if req.finish_reason == "stop" else None}
        return {**base, "object": "text_completion", "choices": [choice]}

    def _chunk(self, req: Request, model: str, chat: bool, token: str | None, role: bool = False,
               finish: str | None = None) -> str:
        if chat:
            delta = {"role": "assistant" if role else None, "content": token,
                     "reasoning_content": None, "tool_calls": None}
            choice: dict[str, Any] = {"index": 0, "delta": delta, "logprobs": None,
                                      "finish_reason": finish, "matched_stop": None}
            obj = "chat.completion.chunk"
        else:
            choice = {"index": 0, "text": token or "", "logprobs": None, "finish_reason": finish,
                      "matched_stop": None}
            obj = "text_completion"
        if finish == "stop":
            choice["matched_stop"] = 1
        data = {"id": req.rid, "object": obj, "created": int(time.time()), "model": model,
                "choices": [choice], "usage": None}
        return "data: " + json.dumps(data, separators=(",", ":")) + "\n\n"

    async def _stream(self, req: Request, model: str, chat: bool, usage: bool
                      ) -> AsyncIterator[str]:
        try:
            if chat:
                yield self._chunk(req, model, chat, "", role=True)
            while (tok := await req.out.get()) is not None:
                yield self._chunk(req, model, chat, tok)
            yield self._chunk(req, model, chat, None, finish=req.finish_reason)
            if usage:
                data: dict[str, Any] = {"id": req.rid, "object": "chat.completion.chunk" if chat else
                        "text_completion", "created": int(time.time()), "model": model,
                        "choices": [], "usage": self._usage(req)}
                yield "data: " + json.dumps(data, separators=(",", ":")) + "\n\n"
            yield "data: [DONE]\n\n"
        finally:
            self.engine.abort(req)

    async def generate(self, request: HttpRequest) -> Response:
        """SGLang's native ``/generate`` (text + sampling_params); with ``"stream": true``
        server-sent events as SGLang's ``http_server`` sends them: one ``data: {json}`` per
        decode step with the *cumulative* text and ``meta_info`` (``completion_tokens`` so
        far, ``finish_reason`` null until the last), then ``data: [DONE]``."""
        refused = self._refuse()
        if refused is not None:
            return refused
        try:
            body = await self._body(request)
            text = body.get("text")
            ids = body.get("input_ids")
            if isinstance(ids, list) and ids and text is None:  # bench_serving's random-ids
                text, ptoks = " ".join(str(i) for i in ids), len(ids)
            elif not isinstance(text, str) or not text:
                raise ValueError("text must be a non-empty string")
            else:
                ptoks = answers.count_tokens(text) + 1
            params = body.get("sampling_params") or {}
            if not isinstance(params, dict):
                raise ValueError("sampling_params must be an object")
            max_tokens = _int(params, "max_new_tokens") or 128
        except ValueError as exc:
            return _error(400, str(exc))
        req = self._request(text, ptoks, params, max_tokens)
        try:
            self.engine.submit(req)
        except EngineClosed as exc:
            return _error(503, str(exc), "ServiceUnavailableError")
        if body.get("stream"):
            return StreamingResponse(self._generate_stream(req), media_type="text/event-stream")
        try:
            out = await self._collect(req)
        finally:
            self.engine.abort(req)
        return JSONResponse({"text": out, "meta_info": self._meta_info(req, req.produced, True)})

    def _meta_info(self, req: Request, tokens: int, finished: bool) -> dict[str, Any]:
        """SGLang's ``meta_info`` of a ``/generate`` answer (or stream chunk) ``tokens`` in."""
        reason: dict[str, Any] | None = None
        if finished:
            reason = {"type": req.finish_reason}
            if req.finish_reason == "length":
                reason["length"] = req.max_tokens
        meta: dict[str, Any] = {"id": req.rid, "finish_reason": reason,
                                "prompt_tokens": req.prompt_tokens, "weight_version": "default",
                                "num_retractions": 0, "reasoning_tokens": 0,
                                "completion_tokens": tokens, "cached_tokens": 0}
        if finished:
            meta["e2e_latency"] = round(time.monotonic() - req.created, 4)
        return meta

    async def _generate_stream(self, req: Request) -> AsyncIterator[str]:
        parts: list[str] = []
        try:
            finished = False
            while not finished:
                tok = await req.out.get()
                if tok is None:  # (a stall fault's abort, or a request cut short)
                    break
                parts.append(tok)
                while not req.out.empty():  # what the same step made: one chunk, as SGLang
                    more = req.out.get_nowait()
                    if more is None:
                        finished = True
                        break
                    parts.append(more)
                data = {"text": "".join(parts), "meta_info": self._meta_info(
                    req, len(parts), finished)}
                yield "data: " + json.dumps(data, separators=(",", ":")) + "\n\n"
            yield "data: [DONE]\n\n"
        finally:
            self.engine.abort(req)


def build_app(sim: SimServer) -> ASGIApp:
    api = Api(sim)
    routes = [
        Route("/health", api.health), Route("/ready", api.health),
        Route("/health_generate", api.health_generate),
        Route("/v1/models", api.models),
        Route("/server_info", api.server_info), Route("/get_server_info", api.server_info),
        Route("/model_info", api.model_info), Route("/get_model_info", api.model_info),
        Route("/metrics", api.metrics),
        Route("/flush_cache", api.flush_cache, methods=["POST", "GET"]),
        Route("/start_profile", api.start_profile, methods=["POST", "GET"]),
        Route("/stop_profile", api.stop_profile, methods=["POST", "GET"]),
        Route("/v1/chat/completions", api.chat, methods=["POST"]),
        Route("/v1/completions", api.completions, methods=["POST"]),
        Route("/generate", api.generate, methods=["POST"]),
    ]
    return _Guard(Starlette(routes=routes), sim)
