"""The openai backend against a real HTTP server on 127.0.0.1 that injects timeouts, 429, 500, 400 and
malformed bodies: every prompt ends with a completion or a recorded error, nothing lost or duplicated,
concurrency bounded, the key never written; a resumed run retries only the failures."""

import json
import socket

import pytest
from generation_helpers import API_KEY, FaultServer, prompts

from mlft.errors import BackendError, ConfigError
from mlft.generation.backends.openai import OpenAIBackend
from mlft.generation.decoding import Decoding
from mlft.generation.prompting import Prompting
from mlft.generation.runner import generate_completions

TEXTS = [
    "one",
    "two",
    "timeout please",
    "rate me",
    "server down",
    "malformed body",
    "shape shifter",
    "bad request",
    "three",
    "four",
    "five",
    "six",
]


def _backend(url, **kw):
    opts = {"concurrency": 3, "timeout": 0.5, "max_retries": 3, "backoff": 0.01}
    opts.update(kw)
    return OpenAIBackend("served-model", base_url=url, api_key=API_KEY, **opts)


def test_faults_recorded_retried_and_resumed(tmp_path):
    out = tmp_path / "c.jsonl"
    ps = prompts(TEXTS)
    with FaultServer() as server:
        backend = _backend(server.url)
        backend.preflight()
        done = generate_completions(ps, backend, Decoding(), Prompting(), out, "served-model", progress=False)
        lines = [json.loads(x) for x in out.read_text().splitlines()]
        assert sorted(r["id"] for r in lines) == sorted(p.id for p in ps)  # one record per prompt
        errors = {r["prompt"]: r["error"] for r in lines if r["error"]}
        assert set(errors) == {"malformed body", "shape shifter", "bad request"}
        assert "malformed" in errors["malformed body"] and "HTTP 400" in errors["bad request"]
        assert {r["prompt"]: r["completion"] for r in done} == {t: f"echo: {t}" for t in TEXTS if t not in errors}
        assert server.attempts["timeout please"] == 2 and server.attempts["rate me"] == 2
        assert server.attempts["server down"] == 3 and server.attempts["one"] == 1
        assert 1 < server.max_in_flight <= 3
        body = server.bodies[0]
        assert body["top_p"] == 0.75 and body["temperature"] == 0.3 and body["max_tokens"] == 100
        assert "min_p" not in body
        assert API_KEY not in out.read_text()

        server.fixed = True
        before = sum(server.attempts.values())
        done = generate_completions(ps, backend, Decoding(), Prompting(), out, "served-model", progress=False)
        assert sum(server.attempts.values()) - before == 3  # only the failures were asked again
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(lines) == len(TEXTS) and len({r["id"] for r in lines}) == len(TEXTS)
    assert not any(r["error"] for r in lines) and len(done) == len(TEXTS)


def test_retries_exhausted_is_a_recorded_error(tmp_path):
    with FaultServer() as server:
        backend = _backend(server.url, max_retries=1)
        recs = generate_completions(
            prompts(["server down", "ok"]), backend, Decoding(), Prompting(), tmp_path / "c.jsonl", "m", progress=False
        )
    lines = [json.loads(x) for x in (tmp_path / "c.jsonl").read_text().splitlines()]
    err = next(r for r in lines if r["prompt"] == "server down")["error"]
    assert "gave up after 2 attempts: HTTP 500" in err
    assert [r["prompt"] for r in recs] == ["ok"]


def test_qa_prompting_uses_completions_route(tmp_path):
    with FaultServer() as server:
        recs = generate_completions(
            prompts(["hello"]),
            _backend(server.url),
            Decoding(temperature=0),
            Prompting(mode="qa"),
            tmp_path / "c.jsonl",
            "m",
            progress=False,
        )
        assert server.bodies[0]["prompt"] == "Q: hello\nA:" and server.bodies[0]["top_p"] == 1.0
    assert recs[0]["completion"] == "echo: Q: hello\nA:".split("\nQ:")[0]


def test_wrong_key_and_unreachable_fail_before_generation(tmp_path, monkeypatch):
    with FaultServer() as server:
        with pytest.raises(BackendError, match="API key was rejected"):
            OpenAIBackend("m", base_url=server.url, api_key="wrong").preflight()
        assert not server.bodies
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    with pytest.raises(BackendError, match="cannot reach"):
        OpenAIBackend("m", base_url=f"http://127.0.0.1:{port}/v1", api_key="k", timeout=2).preflight()
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="no API key"):
        OpenAIBackend("m", base_url="http://127.0.0.1:1/v1")
    with pytest.raises(ConfigError, match="beam"):
        OpenAIBackend("m", api_key="k").check(Decoding(num_beams=2))
    assert API_KEY not in repr(_backend("http://x"))


TRANSPORT = [
    "alpha",
    "cutoff one",
    "reset two",
    "nochoices three",
    "timeout four",
    "rate five",
    "server six",
    "cutoff seven",
    "reset eight",
    "plain nine",
]


def _cli(url, out, *extra):
    from mlft.cli import main

    return main(
        [
            "generate",
            "--backend",
            "openai",
            "--model",
            "served",
            "--base-url",
            url,
            "--api-key",
            API_KEY,
            "--out",
            str(out),
            "--language",
            "de",
            "--per-group",
            "1",
            "--no-progress",
            "--timeout",
            "0.5",
            "--backoff",
            "0.01",
            *extra,
        ]
    )


def test_transport_faults_end_with_one_record_each_and_no_traceback(tmp_path, capsys, monkeypatch):
    """Bodies cut off, connections reset mid-body, 200 without choices: retried; every prompt ends with exactly
    one record holding its own reply within at most 3 runs of the same command; no traceback."""
    out = tmp_path / "c.jsonl"
    ps = prompts(TRANSPORT)
    monkeypatch.setattr("mlft.evals.lcb.select_prompts", lambda o: ps)
    with FaultServer() as server:
        codes = []
        for _ in range(3):
            codes.append(_cli(server.url, out, "--max-retries", "1", "--concurrency", "4"))
            if codes[-1] == 0:
                break
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert codes[-1] == 0 and len(codes) <= 3
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert sorted(r["id"] for r in lines) == sorted(p.id for p in ps)  # exactly one record per prompt
    assert all(r["completion"] == f"echo: {r['prompt']}" and not r["error"] for r in lines)
    assert server.attempts["cutoff one"] == 2 and server.attempts["nochoices three"] == 2


def test_results_are_written_as_they_finish(tmp_path):
    """A crash mid-run loses at most the requests in flight: finished ones are already on disk."""
    ps = prompts([f"prompt {i}" for i in range(12)])
    out = tmp_path / "c.jsonl"
    with FaultServer(delay=0.02) as server:
        backend = _backend(server.url, concurrency=2)
        seen = []
        original = backend.generate

        def crash_after_five(requests, decoding, interventions=()):
            for res in original(requests, decoding, interventions):
                seen.append(res.id)
                if len(seen) == 5:
                    raise KeyboardInterrupt
                yield res

        backend.generate = crash_after_five
        with pytest.raises(KeyboardInterrupt):
            generate_completions(ps, backend, Decoding(), Prompting(), out, "m", progress=False)
    assert len(out.read_text().splitlines()) == 4  # the five finished minus the one being written


def test_server_that_dies_mid_run_ends_the_run_with_one_message(tmp_path, capsys, monkeypatch):
    out = tmp_path / "c.jsonl"
    ps = prompts([f"question {i}" for i in range(30)])
    monkeypatch.setattr("mlft.evals.lcb.select_prompts", lambda o: ps)
    server = FaultServer(die_after=8, delay=0.01).__enter__()
    port = int(server.url.rsplit(":", 1)[1].split("/")[0])
    code = _cli(server.url, out, "--concurrency", "2", "--max-retries", "3")
    err = capsys.readouterr().err
    server.stop()
    assert code == 2 and "Traceback" not in err
    assert err.count("stopped accepting connections") == 1 and "rerun the same command" in err
    kept = [json.loads(x) for x in out.read_text().splitlines()]
    assert 8 <= len(kept) <= 9 and all(not r["error"] for r in kept)  # finished records kept, no error records
    with FaultServer(port=port) as again:  # back on the same address: the rerun only asks for the rest
        assert _cli(again.url, out, "--concurrency", "2") == 0
        assert sum(again.attempts.values()) == 30 - len(kept)
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert sorted(r["id"] for r in lines) == sorted(p.id for p in ps)


def test_unseeded_decoding_sends_no_seed_and_top_k_goes_in_the_body(tmp_path):
    with FaultServer() as server:
        generate_completions(
            prompts(["one"]),
            _backend(server.url),
            Decoding(seed=None, top_k=5),
            Prompting(),
            tmp_path / "c.jsonl",
            "m",
            progress=False,
        )
        body = server.bodies[0]
    assert "seed" not in body and body["top_k"] == 5


def test_logprobs_requested_give_the_nll_column_and_a_server_without_them_is_asked_again(tmp_path):
    with FaultServer() as server:
        recs = generate_completions(
            prompts(["one", "nologprobs two"]),
            _backend(server.url, concurrency=1),
            Decoding(),
            Prompting(),
            tmp_path / "c.jsonl",
            "m",
            progress=False,
        )
        qa = generate_completions(
            prompts(["three"]),
            _backend(server.url),
            Decoding(),
            Prompting(mode="qa"),
            tmp_path / "qa.jsonl",
            "m",
            progress=False,
        )
        bodies = list(server.bodies)
    by = {r["prompt"]: r for r in recs}
    assert by["one"]["nll"] == 1.0 and qa[0]["nll"] == 1.0  # mean of -(-0.5), -(-1.5): chat and completions
    assert not by["nologprobs two"]["error"] and by["nologprobs two"].get("nll") is None
    assert bodies[0]["logprobs"] is True and bodies[0]["top_logprobs"] == 0
    assert "logprobs" not in bodies[-2]  # asked again without, once the server said no
    with FaultServer() as server:
        generate_completions(
            prompts(["one"]),
            _backend(server.url, logprobs=False),
            Decoding(),
            Prompting(),
            tmp_path / "off.jsonl",
            "m",
            progress=False,
        )
        assert "logprobs" not in server.bodies[0]
