"""A torch-backed stand-in for an SGLang server, to exercise ``agent profile run`` on a real GPU.

Not a test and not run by pytest: it made the real PyTorch-profiler fixture in this folder
(``h200_torch_profiler-TP-0.trace.json.gz``) and checked the tensor-core attribution against
real NVML GPM counters on an H200 (docs/kernels.md, "How it was checked").

It serves what the profile command uses -- ``/v1/models``, ``/server_info``, ``/model_info``,
streaming ``/v1/chat/completions``, ``/start_profile`` and ``/stop_profile`` -- from one engine
thread that runs a small "decode step" on the GPU per generated token for every running
request: RMSNorm-like elementwise kernels, a BF16 GEMM (tensor cores), scaled-dot-product
attention, a Triton "slot GEMV" with no ``tl.dot`` (CUDA cores) for the MoE, SiLU-and-mul and
a sampling argmax. Each step runs inside ``record_function("step[DECODE bs=N]")`` like SGLang's
model runner, and ``/start_profile`` with ``num_steps`` records that many steps with
``torch.profiler`` and exports ``{profile_id}-TP-0.trace.json.gz``.

    python3 tests/data/traces/torch_standin.py --port 31999 [--layers 1 --experts 8 --inter 2048]

The defaults made the fixture; ``gpu_check.sh`` also runs a heavier step (``--layers 4
--experts 16 --inter 4096``) so that the GPU is busy for the telemetry.

``--fake`` replaces the GPU work by sleeps (to test the HTTP side without torch).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "standin/tiny-moe"


class Engine:
    def __init__(self, fake: bool, hidden: int = 4096, experts_inter: int = 2048,
                 layers: int = 1, experts: int = 8) -> None:
        self.fake = fake
        self.layers = layers
        self.n_experts = experts
        self.lock = threading.Lock()
        self.running: list[dict[str, Any]] = []
        self.profile: dict[str, Any] | None = None
        self.wake = threading.Event()
        self.steps = 0
        if not fake:
            self._setup(hidden, experts_inter)

    # -- GPU work -------------------------------------------------------------------------
    def _setup(self, h: int, inter: int) -> None:
        import torch
        import triton
        import triton.language as tl

        torch.backends.cuda.matmul.allow_tf32 = False
        self.torch = torch
        dev = "cuda"
        g = torch.Generator(device=dev).manual_seed(0)
        self.h = h
        self.w_qkv = torch.randn(h, 3 * h, device=dev, dtype=torch.bfloat16, generator=g) * 0.02
        self.w_o = torch.randn(h, h, device=dev, dtype=torch.bfloat16, generator=g) * 0.02
        self.kv = torch.randn(64, 32, 2048, 128, device=dev, dtype=torch.bfloat16, generator=g)
        # "experts" of fp32 weights, (inter x h): the slot GEMV reads one per token on CUDA
        # cores, as the campaign's MXFP4 slot GEMV did.
        self.experts = torch.randn(self.n_experts, inter, h, device=dev, dtype=torch.float32,
                                   generator=g) * 0.02
        self.w_down = torch.randn(inter, h, device=dev, dtype=torch.bfloat16, generator=g) * 0.02

        @triton.jit
        def _fp32_slot_gemv_kernel(x_ptr, w_ptr, out_ptr, slot_ptr, H: tl.constexpr,
                                   BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, INTER: tl.constexpr):
            row = tl.program_id(0)  # token
            nb = tl.program_id(1)  # block of output rows
            slot = tl.load(slot_ptr + row)
            offs_n = nb * BLOCK_N + tl.arange(0, BLOCK_N)
            acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
            for k in range(0, H, BLOCK_K):
                offs_k = k + tl.arange(0, BLOCK_K)
                xv = tl.load(x_ptr + row * H + offs_k)
                wv = tl.load(w_ptr + slot * INTER * H + offs_n[:, None] * H + offs_k[None, :])
                acc += tl.sum(wv * xv[None, :], axis=1)  # CUDA cores: no tl.dot
            tl.store(out_ptr + row * INTER + offs_n, acc)

        self.gemv = _fp32_slot_gemv_kernel
        self.inter = inter

    def _step(self, bs: int) -> None:
        if self.fake:
            time.sleep(0.02)
            return
        torch = self.torch
        x = torch.randn(bs, self.h, device="cuda", dtype=torch.bfloat16)
        for _ in range(self.layers):
            xf = x.float()
            x = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(torch.bfloat16)
            qkv = x @ self.w_qkv
            q = qkv[:, : self.h].reshape(bs, 32, 1, 128)
            kv = self.kv[: max(bs, 1)]
            attn = torch.nn.functional.scaled_dot_product_attention(q, kv, kv)
            x = attn.reshape(bs, self.h) @ self.w_o
            slots = torch.randint(0, self.n_experts, (bs,), device="cuda", dtype=torch.int32)
            up = torch.empty(bs, self.inter, device="cuda", dtype=torch.float32)
            self.gemv[(bs, self.inter // 64)](x.float().contiguous(), self.experts, up, slots,
                                              H=self.h, BLOCK_N=64, BLOCK_K=128,
                                              INTER=self.inter)
            act = torch.nn.functional.silu(up) * up
            x = act.to(torch.bfloat16) @ self.w_down
        tok = torch.argmax(torch.softmax(x.float(), -1), -1)
        tok.cpu()

    # -- the loop -------------------------------------------------------------------------
    def loop(self) -> None:
        while True:
            with self.lock:
                reqs = [r for r in self.running if not r["done"]]
            if not reqs:
                self.wake.wait(0.05)
                self.wake.clear()
                continue
            self._maybe_start_profile()
            bs = len(reqs)
            if self.fake:
                self._step(bs)
            else:
                from torch.profiler import record_function

                with record_function(f"step[DECODE bs={bs}]"):
                    self._step(bs)
            self.steps += 1
            self._maybe_stop_profile()
            for r in reqs:
                r["produced"] += 1
                r["q"].put(f"tok{r['produced'] % 10} ")
                if r["produced"] >= r["max_tokens"]:
                    r["done"] = True
                    r["q"].put(None)
            with self.lock:
                self.running = [r for r in self.running if not r["done"]]

    def _maybe_start_profile(self) -> None:
        prof = self.profile
        if prof is None or prof.get("profiler") is not None or prof.get("stopping"):
            return
        if self.fake:
            prof["profiler"] = "fake"
        else:
            from torch.profiler import ProfilerActivity, profile

            p = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                        with_stack=False, record_shapes=False)
            p.start()
            prof["profiler"] = p
        prof["left"] = prof["num_steps"] or 10**9

    def _maybe_stop_profile(self) -> None:
        prof = self.profile
        if prof is None or prof.get("profiler") is None:
            return
        prof["left"] -= 1
        if prof["left"] > 0 and not prof.get("stop"):
            return
        os.makedirs(prof["output_dir"], exist_ok=True)
        path = os.path.join(prof["output_dir"], f"{prof['id']}-TP-0.trace.json.gz")
        if self.fake:
            import gzip

            with gzip.open(path, "wt") as fh:
                json.dump({"traceEvents": []}, fh)
        else:
            prof["profiler"].stop()
            prof["profiler"].export_chrome_trace(path)
        print("profile written:", path, flush=True)
        self.profile = None


def make_handler(engine: Engine) -> type:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt: str, *args: Any) -> None:
            pass

        def _json(self, code: int, obj: Any) -> None:
            data = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _text(self, code: int, text: str) -> None:
            data = text.encode()
            self.send_response(code)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _body(self) -> dict[str, Any]:
            n = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(n) if n else b""
            return json.loads(raw) if raw else {}

        def do_GET(self) -> None:
            if self.path == "/v1/models":
                self._json(200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})
            elif self.path in ("/server_info", "/get_server_info"):
                self._json(200, {"version": "standin", "model_path": MODEL, "tp_size": 1,
                                 "dp_size": 1, "ep_size": 1, "moe_runner_backend": "triton",
                                 "quantization": None})
            elif self.path in ("/model_info", "/get_model_info"):
                self._json(200, {"model_path": MODEL, "served_model_name": MODEL})
            elif self.path == "/health":
                self._text(200, "")
            else:
                self._json(404, {"error": "not found"})

        def do_POST(self) -> None:
            body = self._body()
            if self.path == "/start_profile":
                if engine.profile is not None:
                    self._json(400, {"message": "Profiling is already in progress."})
                    return
                engine.profile = {"output_dir": body.get("output_dir") or "/tmp",
                                  "num_steps": body.get("num_steps"), "id": repr(time.time())}
                self._text(200, "Start profiling.\n")
            elif self.path == "/stop_profile":
                if engine.profile is None:
                    self._json(400, {"message": "Profiling is not in progress."})
                    return
                engine.profile["stop"] = True
                self._text(200, "Stop profiling. This will take some time.\n")
            elif self.path == "/v1/chat/completions":
                self._stream(body)
            else:
                self._json(404, {"error": "not found"})

        def _stream(self, body: dict[str, Any]) -> None:
            req = {"q": queue.Queue(), "produced": 0, "done": False,
                   "max_tokens": int(body.get("max_tokens") or 16)}
            with engine.lock:
                engine.running.append(req)
            engine.wake.set()
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()

            def chunk(obj: Any) -> None:
                data = ("data: %s\n\n" % (obj if isinstance(obj, str) else json.dumps(obj))).encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()

            try:
                chunk({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
                while True:
                    tok = req["q"].get()
                    if tok is None:
                        break
                    chunk({"choices": [{"index": 0, "delta": {"content": tok}}]})
                chunk({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]})
                chunk({"choices": [], "usage": {"completion_tokens": req["produced"],
                                                "prompt_tokens": 8}})
                chunk("[DONE]")
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                req["done"] = True

    return Handler


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=31999)
    ap.add_argument("--fake", action="store_true")
    ap.add_argument("--layers", type=int, default=1, help="layers per decode step")
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--inter", type=int, default=2048, help="rows of one expert")
    args = ap.parse_args()
    engine = Engine(args.fake, experts_inter=args.inter, layers=args.layers,
                    experts=args.experts)
    threading.Thread(target=engine.loop, daemon=True).start()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(engine))
    server.daemon_threads = True
    print("standin listening on", args.port, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
