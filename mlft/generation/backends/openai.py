"""Any OpenAI-compatible endpoint (hosted APIs, `vllm serve`, llama.cpp server): chat messages go to
`/chat/completions`, raw text (Q/A template) to `/completions`.

Bounded concurrency (a thread pool), a per-request timeout, retries with exponential backoff on timeouts,
connection resets, 429 and 5xx; other 4xx and malformed bodies give a recorded per-prompt error, and
401/403/404 stop the run (the key, URL or model name must be fixed). The API key comes from the option or
an environment variable and is only ever placed in the Authorization header: never in records or messages.
"""

from __future__ import annotations

import json
import os
import socket
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

from mlft.errors import BackendError, ConfigError
from mlft.generation.backends import Request, Result
from mlft.generation.decoding import Decoding

DEFAULT_KEY_ENV = "OPENAI_API_KEY"
FATAL_STATUS = {401: "the API key was rejected", 403: "access forbidden", 404: "not found (check base URL / model)"}


class _Retryable(Exception):
    pass


class OpenAIBackend:
    name = "openai"

    def __init__(self, model: str, base_url: str | None = None, api_key: str | None = None,
                 api_key_env: str = DEFAULT_KEY_ENV, concurrency: int = 8, timeout: float = 60.0,
                 max_retries: int = 5, backoff: float = 1.0, batch_size: int | None = None):
        self.model = model
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1").rstrip("/")
        self._key = api_key or os.environ.get(api_key_env)
        if not self._key:
            raise ConfigError(f"openai backend: no API key: pass --api-key or set ${api_key_env} "
                              "(a local server without auth accepts any value, e.g. EMPTY)")
        if concurrency < 1 or timeout <= 0 or max_retries < 0:
            raise ConfigError("openai backend: concurrency >= 1, timeout > 0 and max_retries >= 0 required")
        self.concurrency, self.timeout, self.max_retries, self.backoff = concurrency, timeout, max_retries, backoff
        self.batch_size = batch_size or 4 * concurrency

    def __repr__(self):  # never show the key
        return f"OpenAIBackend(model={self.model!r}, base_url={self.base_url!r})"

    def prompt_length(self, req: Request) -> int:
        return len(req.text) if req.text is not None else sum(len(m["content"]) for m in req.messages)

    def check(self, decoding: Decoding) -> None:
        if decoding.num_beams > 1:
            raise ConfigError("openai backend: beam search (num_beams > 1) is not offered by the API; use hf")

    def preflight(self) -> None:
        """Fail before any generation if the server is unreachable or rejects the key."""
        req = urllib.request.Request(f"{self.base_url}/models", headers=self._headers())
        try:
            with urllib.request.urlopen(req, timeout=min(self.timeout, 15)):  # noqa: S310 (user-given URL)
                return
        except urllib.error.HTTPError as exc:
            if exc.code in (401, 403):
                raise BackendError(f"{self.base_url}: {FATAL_STATUS[exc.code]} (HTTP {exc.code})") from None
            return  # some servers have no /models; real requests will tell
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise BackendError(f"cannot reach {self.base_url} ({reason})") from None

    def _headers(self) -> dict:
        return {"Authorization": f"Bearer {self._key}", "Content-Type": "application/json"}

    def _payload(self, req: Request, d: Decoding) -> tuple[str, dict]:
        body = {"model": self.model, "max_tokens": d.max_new_tokens, "temperature": d.temperature,
                "top_p": d.top_p if d.sampling else 1.0, "seed": d.seed, "n": 1}
        if d.top_k and d.sampling:
            body["top_k"] = d.top_k  # vLLM / llama.cpp extension
        if req.messages is not None:
            return "/chat/completions", {**body, "messages": req.messages}
        return "/completions", {**body, "prompt": req.text}

    def _post(self, route: str, body: dict) -> dict:
        data = json.dumps(body).encode()
        http = urllib.request.Request(f"{self.base_url}{route}", data=data, headers=self._headers(), method="POST")
        try:
            with urllib.request.urlopen(http, timeout=self.timeout) as resp:  # noqa: S310
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read()[:300].decode("utf-8", "replace")
            if exc.code in FATAL_STATUS:
                raise BackendError(f"{self.base_url}{route}: {FATAL_STATUS[exc.code]} (HTTP {exc.code}: {detail})")
            if exc.code == 429 or exc.code >= 500:
                raise _Retryable(f"HTTP {exc.code}", exc.headers.get("Retry-After")) from None
            raise ValueError(f"HTTP {exc.code}: {detail}") from None
        except (socket.timeout, TimeoutError) as exc:
            raise _Retryable(f"timeout after {self.timeout}s ({exc})", None) from None
        except (urllib.error.URLError, ConnectionError, OSError) as exc:
            raise _Retryable(f"connection error ({getattr(exc, 'reason', exc)})", None) from None
        try:
            return json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise ValueError(f"malformed response body: {raw[:200]!r}") from None

    def _one(self, req: Request, d: Decoding) -> Result:
        route, body = self._payload(req, d)
        started = time.perf_counter()
        for attempt in range(self.max_retries + 1):
            try:
                reply = self._post(route, body)
                return self._parse(req, reply, time.perf_counter() - started)
            except _Retryable as exc:
                message, retry_after = exc.args
                if attempt == self.max_retries:
                    return Result(req.id, error=f"gave up after {attempt + 1} attempts: {message}",
                                  seconds=time.perf_counter() - started)
                wait = self.backoff * 2 ** attempt
                if retry_after:
                    try:
                        wait = max(wait, min(float(retry_after), 60.0))
                    except ValueError:
                        pass
                time.sleep(wait)
            except ValueError as exc:
                return Result(req.id, error=str(exc), seconds=time.perf_counter() - started)

    @staticmethod
    def _parse(req: Request, reply: dict, seconds: float) -> Result:
        try:
            choice = reply["choices"][0]
            text = choice["message"]["content"] if req.messages is not None else choice["text"]
            if not isinstance(text, str):
                raise TypeError("completion is not text")
        except (KeyError, IndexError, TypeError) as exc:
            raise ValueError(f"malformed response: no choices[0] completion ({exc})") from None
        usage = reply.get("usage") or {}
        return Result(req.id, text, choice.get("finish_reason"), usage.get("prompt_tokens"),
                      usage.get("completion_tokens"), seconds)

    def generate(self, requests: list[Request], decoding: Decoding) -> list[Result]:
        self.check(decoding)
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            return list(pool.map(lambda r: self._one(r, decoding), requests))
