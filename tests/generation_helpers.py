"""Shared pieces of the generation tests: synthetic prompts and a fault-injecting OpenAI-compatible server."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from mlft.benchmarks.lcb.data import Prompt

API_KEY = "sk-test-secret-0123"


def prompts(texts: list[str], language: str = "de") -> list[Prompt]:
    return [
        Prompt(id=f"monolingual/okapi/{language}/{i}", task="monolingual", source="okapi", language=language, prompt=t)
        for i, t in enumerate(texts)
    ]


class FaultServer:
    """Chat/completions endpoint on 127.0.0.1 replying `echo: <prompt>`, with faults chosen by the prompt:
    'timeout' sleeps past the client timeout once, 'rate' gets one 429, 'server' two 500s, 'malformed' a
    broken JSON body and 'shape' a JSON body without choices (both until `fixed`), 'bad' a 400; transient
    transport faults on the first attempt: 'cutoff' (a 200 whose body stops mid-way, the connection closed),
    'reset' (the connection reset mid-body), 'nochoices' (a 200 with an empty `choices` list).
    `die_after=N`: after N good replies the server closes its port (a server that dies mid-run)."""

    def __init__(self, slow: float = 1.5, delay: float = 0.05, die_after: int | None = None, port: int = 0, reply=None):
        self.slow, self.delay, self.fixed, self.die_after = slow, delay, False, die_after
        self.reply = reply  # optional body -> (text, finish_reason): a scripted model
        self.good = 0
        self.attempts: Counter = Counter()
        self.in_flight = self.max_in_flight = 0
        self.lock = threading.Lock()
        self.bodies: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, code: int, body: bytes, headers: dict | None = None):
                self.send_response(code)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_GET(self):
                ok = self.headers.get("Authorization") == f"Bearer {API_KEY}"
                self._send(200 if ok else 401, b'{"data": []}' if ok else b'{"error": "bad key"}')

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.headers.get("Authorization") != f"Bearer {API_KEY}":
                    return self._send(401, b'{"error": "bad key"}')
                with server.lock:
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                    server.bodies.append(body)
                try:
                    self._reply(body)
                finally:
                    with server.lock:
                        server.in_flight -= 1

            def _reply(self, body):
                text = body["messages"][-1]["content"] if "messages" in body else body["prompt"]
                with server.lock:
                    server.attempts[text] += 1
                    n = server.attempts[text]
                time.sleep(server.delay)
                if "timeout" in text and n == 1:
                    time.sleep(server.slow)
                elif "rate" in text and n == 1:
                    return self._send(429, b'{"error": "slow down"}', {"Retry-After": "0"})
                elif "server" in text and n <= 2:
                    return self._send(500, b'{"error": "oops"}')
                elif "malformed" in text and not server.fixed:
                    return self._send(200, b'{"choices": [{"message": ')
                elif "shape" in text and not server.fixed:
                    return self._send(200, b'{"object": "nothing"}')
                elif "bad" in text and not server.fixed:
                    return self._send(400, b'{"error": "context too long"}')
                elif "cutoff" in text and n == 1:
                    return self._partial(close=True)
                elif "reset" in text and n == 1:
                    return self._partial(close=False)
                elif "nologprobs" in text and "logprobs" in body:
                    return self._send(400, b'{"error": "logprobs are not supported by this server"}')
                elif "nochoices" in text and n == 1:
                    return self._send(200, b'{"choices": [], "object": "chat.completion"}')
                got = server.reply(body) if server.reply else (f"echo: {text}", "stop")
                content, finish, reasoning = (*got, None)[:3]  # reasoning: a reasoning parser's separate trace
                message = {"role": "assistant", "content": content}
                if reasoning is not None:
                    message["reasoning_content"] = reasoning
                choice = {"message": message} if "messages" in body else {"text": content}
                if body.get("logprobs") is not None and body.get("logprobs") is not False:  # two tokens
                    choice["logprobs"] = (
                        {"content": [{"token": "a", "logprob": -0.5}, {"token": "b", "logprob": -1.5}]}
                        if "messages" in body
                        else {"token_logprobs": [-0.5, -1.5]}
                    )
                reply = {
                    "choices": [{**choice, "finish_reason": finish}],
                    "usage": {"prompt_tokens": len(text.split()), "completion_tokens": 2},
                }
                self._send(200, json.dumps(reply).encode())
                with server.lock:
                    server.good += 1
                    if server.die_after is not None and server.good == server.die_after:
                        threading.Thread(target=server.stop, daemon=True).start()

            def _partial(self, close: bool):
                """Headers announcing a long body, half of it, then a clean close or a TCP reset."""
                import socket
                import struct

                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "400")
                self.end_headers()
                self.wfile.write(b'{"choices": [{"message": {"role": "assistant", "content": "echo')
                self.wfile.flush()
                if not close:
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.close_connection = True
                self.connection.close()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def stop(self):
        """Stop serving and close the listening socket: new connections are refused."""
        if not getattr(self, "_stopped", False):
            self._stopped = True
            self.httpd.shutdown()
            self.httpd.server_close()

    def __exit__(self, *exc):
        self.stop()


class TextBackend:
    """A backend without a model (the `Backend` protocol): subclasses say what a request's reply is (`reply`).
    Tests register one to show that a backend is one class + one registry line."""

    name = "text"
    batch_size = 8

    def __init__(self, options):
        self.options = options

    @classmethod
    def create(cls, options, *, model_ref=None, model=None, tokenizer=None, batch_size=16, token_stats=False):
        return cls(options)

    def prompt_length(self, request) -> int:
        return len(request.text or json.dumps(request.messages))

    def check(self, decoding, interventions=()) -> None:
        pass

    def reply(self, request) -> str:
        raise NotImplementedError

    def generate(self, requests, decoding, interventions=()):
        from mlft.generation.requests import Result

        for r in requests:
            yield Result(r.id, self.reply(r), finish_reason="stop")

    def close(self) -> None:
        pass
