"""`mlft generate` / `mlft eval`: bad input gives a clear message and exit 2 before any generation."""

import socket

import pytest
from generation_helpers import API_KEY, FaultServer

from mlft.cli import main


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(
    "argv,message",
    [
        (["eval", "lcb_tiny", "--backend", "vlm"], "unknown backend 'vlm'"),
        (["eval", "lcb_tiny", "--model", "no-such-model"], "unknown model 'no-such-model'"),
        (["eval", "lcb_tiny", "decodng.temperature=0"], "unknown key 'decodng'"),
        (["eval", "lcb_tiny", "languages=[de,xx]"], "unknown language 'xx'"),
        (["eval", "no_such_suite"], "unknown eval suite"),
        (["generate", "--language", "xx"], "unknown language 'xx'"),
        (["generate", "--backend", "openai", "--model", "m", "--base-url", "http://127.0.0.1:1/v1"], "no API key"),
        (["generate", "--prompting", "qa", "--shots", "7"], "0..5"),
    ],
)
def test_bad_input_exits_before_generation(argv, message, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    out = tmp_path / "out"
    argv = argv + (["--out", str(out / "c.jsonl")] if argv[0] == "generate" else ["--out", str(out)])
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not out.exists()


def test_unreachable_server_and_rejected_key(tmp_path, capsys, monkeypatch, shared):
    monkeypatch.setenv("MLFT_LCB_DATA", str(shared / "lcb"))
    monkeypatch.setenv("OPENAI_API_KEY", "wrong-key")
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    assert (
        main(
            ["eval", "lcb_tiny", "--backend", "openai", "--model", "m", "--base-url", url, "--out", str(tmp_path / "a")]
        )
        == 2
    )
    assert "cannot reach" in capsys.readouterr().err
    with FaultServer() as server:
        assert (
            main(
                [
                    "generate",
                    "--backend",
                    "openai",
                    "--model",
                    "m",
                    "--base-url",
                    server.url,
                    "--out",
                    str(tmp_path / "b.jsonl"),
                ]
            )
            == 2
        )
        assert "API key was rejected" in capsys.readouterr().err and not server.bodies
        monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
        assert (
            main(
                [
                    "eval",
                    "lcb_tiny",
                    "per_group=1",
                    "languages=[de]",
                    "--backend",
                    "openai",
                    "--model",
                    "m",
                    "--base-url",
                    server.url,
                    "--out",
                    str(tmp_path / "c"),
                    "--no-progress",
                ]
            )
            == 0
        )
    printed = capsys.readouterr().out
    assert "monolingual LPR (%)" in printed
    assert API_KEY not in (tmp_path / "c" / "default" / "completions.jsonl").read_text()
    page = (tmp_path / "c" / "report.html").read_text(encoding="utf-8")  # the reply page beside report.md
    assert 'id="view-0"' in page and API_KEY not in page
