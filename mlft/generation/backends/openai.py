"""Any OpenAI-compatible endpoint (hosted APIs, `vllm serve`, llama.cpp server), through the `openai` client:
chat messages go to `/chat/completions`, raw text (the Q/A template) to `/completions`.

- Pooled connections (one client, thread-safe), a per-request timeout, bounded concurrency (a thread pool).
- Retries with full-jitter exponential backoff, honouring `Retry-After` / `retry-after-ms`, on every transport
  fault: timeouts, refused or reset connections, bodies cut off mid-way, 408/409/429/5xx, and 200 answers
  whose body is not JSON or has no `choices` (mlft retries itself: the client's own retries are off, so every
  fault is counted and reported per prompt).
- Results are yielded as each request finishes, so the runner writes them at once: a crash loses at most the
  requests in flight.
- A request that still fails becomes a per-prompt error record (retried by the next run); nothing escapes as a
  traceback. 401/403/404 end the run with one message (the key, URL or model name must be fixed), and so
  does a server that stopped accepting connections (finished completions are kept; rerun to resume).
- The API key comes from the option or an environment variable and is only ever placed in the client's
  Authorization header: never in records, reprs or messages.
- The script gate runs on a `vllm serve` that loaded mlft's plugin (served_gate.py): a `script_gate` intervention
  is sent with every request as `vllm_xargs` (the request's target language and the gate's settings). Before the
  first gated request the backend checks the server applies them (a request naming no known language must be
  refused: a server without the plugin would ignore the arguments and answer ungated). Other logits-processor
  interventions need the model's logits here and are refused.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from mlft.benchmarks.lcb.traces import DEFAULT_MARKERS
from mlft.errors import BackendError, ConfigError
from mlft.generation.backends import Capabilities
from mlft.generation.backends.served_gate import LANGUAGE, PLUGIN, gate_xargs
from mlft.generation.requests import Request, Result, request_seed

DEFAULT_KEY_ENV = "OPENAI_API_KEY"
FATAL_STATUS = {401: "the API key was rejected", 403: "access forbidden", 404: "not found (check base URL / model)"}
RETRY_STATUS = {408, 409, 429}


@dataclass
class OpenAIOptions:
    base_url: str | None = field(
        default=None,
        metadata={"help": "endpoint, e.g. http://host:8000/v1 (default $OPENAI_BASE_URL, else api.openai.com)"},
    )
    api_key: str | None = field(default=None, metadata={"help": "API key (default: the --api-key-env variable)"})
    api_key_env: str = field(default=DEFAULT_KEY_ENV, metadata={"help": "environment variable holding the key"})
    concurrency: int = field(default=8, metadata={"help": "requests in flight at most"})
    timeout: float = field(default=60.0, metadata={"help": "seconds per request attempt"})
    max_retries: int = field(default=5, metadata={"help": "retries per request on transport faults/429/5xx"})
    backoff: float = field(
        default=1.0,
        metadata={
            "help": "base of the exponential backoff in seconds (full jitter: a wait is uniform in [0, base*2^k])"
        },
    )
    max_backoff: float = field(default=60.0, metadata={"help": "longest wait between two attempts (seconds)"})
    logprobs: bool = field(
        default=True,
        metadata={
            "help": "ask for the generated tokens' log-probabilities (the fluency NLL column; vLLM servers give the "
            "raw "
            "ones, before temperature/top-p); a server that rejects them is asked again without, once"
        },
    )


class _Retry(Exception):
    """A transient fault: try again (message, Retry-After seconds or None)."""


class _ServerGone(Exception):
    """Connections are refused: the server is down."""


class OpenAIBackend:
    name = "openai"
    Options = OpenAIOptions
    # a served model: no weights, no checkpoints; of the logits processors only the gate (on a server with its plugin)
    capabilities = Capabilities(chat=True, hooks={"strategy", "processors"})

    def __init__(self, model: str, options: OpenAIOptions | None = None, batch_size: int | None = None, **kw):
        o = options or OpenAIOptions(**kw)
        self.model = model
        self.base_url = (o.base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1").rstrip("/")
        key = o.api_key or os.environ.get(o.api_key_env)
        if not key:
            raise ConfigError(
                f"openai backend: no API key: pass --api-key or set ${o.api_key_env} "
                "(a local server without auth accepts any value, e.g. EMPTY)"
            )
        if o.concurrency < 1 or o.timeout <= 0 or o.max_retries < 0 or o.backoff < 0:
            raise ConfigError("openai backend: concurrency >= 1, timeout > 0, max_retries >= 0 and backoff >= 0")
        self.options = o
        self.batch_size = batch_size or 4 * o.concurrency
        import openai

        self._openai = openai
        self._client = openai.OpenAI(api_key=key, base_url=self.base_url, timeout=o.timeout, max_retries=0)
        self._abort = threading.Event()
        self._no_logprobs = False  # set when the server rejected a request for logprobs
        self._gate = None  # the script gate's options for this generate call (sent as vllm_xargs)
        self._gate_checked = False  # the server was seen to run mlft's gate plugin

    @classmethod
    def create(
        cls, options: OpenAIOptions, *, model_ref=None, model=None, tokenizer=None, batch_size=16, token_stats=False
    ) -> OpenAIBackend:
        if model is not None:
            raise ConfigError("openai backend: it generates on a server; a live model cannot be used (use hf)")
        if not model_ref:
            raise ConfigError("openai backend: --model names the served model; none given")
        if token_stats:
            raise ConfigError("openai backend: token statistics (token_stats) need the model's logits; use hf")
        backend = cls(model_ref, options)
        backend.preflight()
        return backend

    @staticmethod
    def lm_eval_generation_only(lm_options) -> bool:
        """An `lm_eval` suite's model on this server scores no log-likelihoods through the chat endpoint."""
        return lm_options.api == "chat"

    @classmethod
    def lm_eval_model(cls, options: OpenAIOptions, *, model_ref: str | None, lm_options):
        """lm-eval's API model on the same server (`api: chat` -> local-chat-completions, generation tasks only;
        `api: completions` -> local-completions, which also scores log-likelihoods and needs `tokenizer`), with
        mlft's key (never exported to the environment)."""
        from lm_eval.api.registry import get_model

        o = lm_options
        if not model_ref:
            raise ConfigError("openai backend: --model names the served model; none given")
        base = (options.base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1").rstrip("/")
        key = options.api_key or os.environ.get(options.api_key_env)
        if not key:
            raise ConfigError(f"openai backend: no API key: pass --api-key or set ${options.api_key_env}")
        name = "local-chat-completions" if o.api == "chat" else "local-completions"
        api_cls = get_model(name)
        keyed = type(f"Mlft{api_cls.__name__}", (api_cls,), {"api_key": property(lambda self: key)})
        kwargs = {
            "model": model_ref,
            "base_url": f"{base}/{'chat/completions' if o.api == 'chat' else 'completions'}",
            "num_concurrent": options.concurrency,
            "max_retries": options.max_retries,
            "timeout": int(options.timeout),
            "batch_size": 1 if o.api == "chat" else o.batch_size,
        }
        if o.api == "chat":
            kwargs["tokenizer_backend"] = None
        else:
            if not o.tokenizer:
                raise ConfigError(
                    "lm_eval suite on the openai backend with api=completions: set `tokenizer` (the "
                    "served model's hub id or folder)"
                )
            kwargs["tokenizer"] = o.tokenizer
        return keyed(**kwargs)

    def __repr__(self):  # never show the key
        return f"OpenAIBackend(model={self.model!r}, base_url={self.base_url!r})"

    def close(self) -> None:
        self._client.close()

    def prompt_length(self, req: Request) -> int:
        return len(req.text) if req.text is not None else sum(len(m["content"]) for m in req.messages)

    @staticmethod
    def unsupported(iv) -> str | None:
        """Of the logits processors, only the script gate runs on a server (mlft's vLLM plugin), without the
        calibration (it needs the output embeddings)."""
        if "processors" not in iv.applies_via:
            return None
        if iv.name != "script_gate":
            return "its logits processor needs the model's logits (only script_gate runs on a server); use hf or vllm"
        if iv.options.calibrate:
            return "calibrate needs the output embeddings (the model's weights); use hf"
        return None

    def check(self, decoding, interventions: Sequence = ()) -> None:
        if decoding.num_beams > 1:
            raise ConfigError("openai backend: beam search (num_beams > 1) is not offered by the API; use hf")
        for iv in interventions:
            problem = self.unsupported(iv)
            if set(iv.applies_via) - self.capabilities.hooks:
                problem = "it needs the model's internals; use hf"
            if problem:
                raise ConfigError(f"openai backend: intervention {iv.name!r}: {problem}")

    def check_gate_server(self) -> None:
        """Fail before the first gated request unless the server runs mlft's gate plugin: a request naming no
        language mlft knows must come back refused (HTTP 400 naming the argument); a server without the plugin
        ignores `vllm_xargs` (vLLM) or refuses them for another reason (other APIs)."""
        if self._gate_checked:
            return
        oa = self._openai
        hint = f"start it with `vllm serve MODEL --logits-processors {PLUGIN}` (docs/generating.md)"
        try:
            self._client.completions.create(
                model=self.model, prompt="Hi", max_tokens=1, extra_body={"vllm_xargs": {LANGUAGE: "mlft-probe"}}
            )
        except oa.BadRequestError as exc:
            if LANGUAGE in _detail(exc):
                self._gate_checked = True
                return
            raise BackendError(
                f"{self.base_url}: the server refused mlft's gate arguments ({_detail(exc)}); script_gate on the "
                f"openai backend needs a vLLM server with mlft's plugin: {hint}"
            ) from None
        except oa.APIConnectionError as exc:
            raise BackendError(f"cannot reach {self.base_url} ({_reason(exc)})") from None
        except oa.APIStatusError as exc:
            raise BackendError(f"{self.base_url}: gate check failed (HTTP {exc.status_code}: {_detail(exc)})") from None
        raise BackendError(
            f"{self.base_url}: the server ignores mlft's gate arguments (a request gated to an unknown language was "
            f"answered): it does not run mlft's gate plugin; {hint}"
        )

    def preflight(self) -> None:
        """Fail before any generation if the server is unreachable or rejects the key."""
        oa = self._openai
        try:
            self._client.with_options(timeout=min(self.options.timeout, 15)).models.list()
        except (oa.AuthenticationError, oa.PermissionDeniedError) as exc:
            raise BackendError(f"{self.base_url}: {FATAL_STATUS[exc.status_code]} (HTTP {exc.status_code})") from None
        except oa.APIConnectionError as exc:
            raise BackendError(f"cannot reach {self.base_url} ({_reason(exc)})") from None
        except (oa.APIStatusError, ValueError, TypeError):
            return  # some servers have no /models (or an odd one); real requests will tell

    # -- one request ------------------------------------------------------------------------------------
    def _payload(self, req: Request, d) -> dict:
        body = {
            "model": self.model,
            "max_tokens": d.max_new_tokens,
            "temperature": d.temperature,
            "top_p": d.top_p if d.sampling else 1.0,
            "n": 1,
        }
        if d.seed is not None:  # per request: several replies of one prompt differ, batching changes nothing
            body["seed"] = request_seed(d.seed, req.id, req.prefix)
        if self.options.logprobs and not self._no_logprobs:
            if req.messages is not None:
                body.update(logprobs=True, top_logprobs=0)
            else:
                body["logprobs"] = 0
        extra = {}
        if d.top_k and d.sampling:
            extra["top_k"] = d.top_k  # vLLM / llama.cpp extension
        if self._gate is not None:
            xargs = gate_xargs(self._gate, req.language)
            if xargs:
                extra["vllm_xargs"] = xargs
        if req.stop_at_newline:
            body["stop"] = ["\n"]
        if req.messages is not None:
            body["messages"] = req.messages
            if req.prefix:  # continue the reply (vLLM's continue_final_message)
                body["messages"] = [*req.messages, {"role": "assistant", "content": req.prefix}]
                extra.update(continue_final_message=True, add_generation_prompt=False)
        else:
            body["prompt"] = req.text + req.prefix
        if extra:
            body["extra_body"] = extra
        return body

    def _attempt(self, req: Request, body: dict) -> Result:
        oa = self._openai
        api = self._client.chat.completions if req.messages is not None else self._client.completions
        started = time.perf_counter()
        try:
            raw = api.with_raw_response.create(**body)
            text = raw.http_response.text
        except oa.APITimeoutError:
            raise _Retry(f"timeout after {self.options.timeout:g}s", None) from None
        except oa.APIConnectionError as exc:
            if _refused(exc):
                raise _ServerGone(_reason(exc)) from None
            raise _Retry(f"connection error ({_reason(exc)})", None) from None
        except oa.APIStatusError as exc:
            code = exc.status_code
            detail = _detail(exc)
            if code in FATAL_STATUS:
                raise BackendError(f"{self.base_url}: {FATAL_STATUS[code]} (HTTP {code}: {detail})") from None
            if code in RETRY_STATUS or code >= 500:
                raise _Retry(f"HTTP {code}", _retry_after(exc.response)) from None
            return Result(req.id, error=f"HTTP {code}: {detail}", seconds=time.perf_counter() - started)
        try:
            reply = json.loads(text)
            choice = reply["choices"][0]
            completion = _with_trace(choice["message"]) if req.messages is not None else choice["text"]
            if not isinstance(completion, str):
                raise TypeError("completion is not text")
        except json.JSONDecodeError:
            raise _Retry(f"malformed response body: {text[:120]!r}", None) from None
        except (KeyError, IndexError, TypeError) as exc:
            raise _Retry(f"malformed response: no choices[0] completion ({type(exc).__name__}: {exc})", None) from None
        usage = reply.get("usage") or {}
        finish = choice.get("finish_reason")
        if req.stop_at_newline and finish == "stop" and completion:
            # servers strip a stop string; vLLM says which one fired (stop_reason), others cannot tell it from
            # EOS: take it as the newline (an end of reply then shows as an empty continuation)
            if choice.get("stop_reason", "\n") == "\n":
                completion, finish = completion + "\n", "newline"
        res = Result(
            req.id,
            completion,
            finish,
            usage.get("prompt_tokens"),
            usage.get("completion_tokens"),
            time.perf_counter() - started,
        )
        nll = _mean_nll(choice.get("logprobs"))
        if nll is not None and completion.strip():
            res.extra["nll"] = nll
        return res

    def _one(self, req: Request, decoding) -> Result:
        body = self._payload(req, decoding)
        started = time.perf_counter()
        o = self.options
        refused = False
        for attempt in range(o.max_retries + 1):
            if self._abort.is_set():
                return Result(req.id, error="not sent: the run was stopped", seconds=0.0)
            try:
                res = self._attempt(req, body)
                if (
                    res.error
                    and res.error.startswith("HTTP 400")
                    and "logprob" in res.error.lower()
                    and ("logprobs" in body)
                ):  # the server offers no logprobs: ask without, from now on
                    self._no_logprobs = True
                    body = self._payload(req, decoding)
                    res = self._attempt(req, body)
                res.seconds = time.perf_counter() - started
                return res
            except _ServerGone as exc:
                refused = True
                message, retry_after = f"connection refused ({exc})", None
            except _Retry as exc:
                refused = False
                message, retry_after = exc.args
            except BackendError:
                raise
            except Exception as exc:  # noqa: BLE001 — never a traceback: a per-prompt error record instead
                return Result(req.id, error=f"{type(exc).__name__}: {exc}", seconds=time.perf_counter() - started)
            if attempt == o.max_retries:
                if refused:  # the last attempt found nothing listening: the server is gone
                    raise _ServerGone(message)
                return Result(
                    req.id,
                    error=f"gave up after {attempt + 1} attempts: {message}",
                    seconds=time.perf_counter() - started,
                )
            wait_s = random.uniform(0, min(o.max_backoff, o.backoff * 2**attempt))
            if retry_after is not None:
                wait_s = max(wait_s, min(retry_after, o.max_backoff))
            self._abort.wait(wait_s)
        raise AssertionError("unreachable")

    # -- many requests ----------------------------------------------------------------------------------
    def generate(self, requests: list[Request], decoding, interventions: Sequence = ()) -> Iterator[Result]:
        self.check(decoding, interventions)
        gates = [iv.options for iv in interventions if iv.name == "script_gate"]
        self._gate = gates[0] if gates else None
        if self._gate is not None and any(gate_xargs(self._gate, r.language) for r in requests):
            self.check_gate_server()
        self._abort.clear()
        pool = ThreadPoolExecutor(max_workers=self.options.concurrency, thread_name_prefix="mlft-openai")
        pending = {pool.submit(self._one, r, decoding) for r in requests}
        try:
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    try:
                        yield fut.result()
                    except _ServerGone as exc:
                        raise BackendError(
                            f"{self.base_url} stopped accepting connections ({exc}); the completions "
                            "finished so far are saved: rerun the same command to resume once the "
                            "server is back"
                        ) from None
        finally:
            self._abort.set()  # waiting retries return at once; unsent requests are not sent
            for fut in pending:
                fut.cancel()
            pool.shutdown(wait=True, cancel_futures=True)


def _with_trace(message: dict):
    """A chat reply's text with its reasoning trace put back: a server with a reasoning parser (vLLM's
    `--reasoning-parser`, others) returns the trace apart (`reasoning_content`, or `reasoning`), and mlft keeps it in
    the reply between the default trace markers (`mlft.benchmarks.lcb.traces`), where scoring splits it again. A
    reply that ran out while thinking has no content: its trace stays unclosed."""
    content = message.get("content")
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    if not isinstance(reasoning, str) or not reasoning:
        return content
    m = DEFAULT_MARKERS
    return f"{m.open}{reasoning}" if content is None else f"{m.open}{reasoning}{m.close}{content}"


def _mean_nll(logprobs) -> float | None:
    """Mean negative log-probability of the generated tokens from a choice's `logprobs` (chat: `content` entries;
    completions: `token_logprobs`); None when absent."""
    if not isinstance(logprobs, dict):
        return None
    values = logprobs.get("token_logprobs")
    if values is None and isinstance(logprobs.get("content"), list):
        values = [e.get("logprob") for e in logprobs["content"] if isinstance(e, dict)]
    values = [float(v) for v in values or [] if isinstance(v, (int, float)) and v > float("-inf")]
    return round(-sum(values) / len(values), 5) if values else None


def _reason(exc: Exception) -> str:
    cause = exc.__cause__ or exc.__context__
    return f"{type(cause).__name__}: {cause}" if cause else str(exc)


def _refused(exc: Exception) -> bool:
    """True when no connection could be made at all (nothing listens there any more)."""
    cause = exc.__cause__ or exc.__context__
    while cause is not None:
        if isinstance(cause, ConnectionRefusedError) or type(cause).__name__ == "ConnectError":
            return True
        cause = cause.__cause__ or cause.__context__
    return False


def _detail(exc) -> str:
    try:
        return exc.response.text[:300]
    except Exception:  # noqa: BLE001
        return str(exc)[:300]


def _retry_after(response) -> float | None:
    """Seconds from `retry-after-ms` or `Retry-After` (seconds or an HTTP date); None if absent/unreadable."""
    headers = getattr(response, "headers", None) or {}
    try:
        if headers.get("retry-after-ms"):
            return max(0.0, float(headers["retry-after-ms"]) / 1000)
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            from email.utils import parsedate_to_datetime

            return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError, OverflowError):
        return None
