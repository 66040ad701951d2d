"""Line resampling against an OpenAI-compatible server (model-agnostic: continue a reply, stop at a newline):
a line the verifier places in the wrong language is drawn again and the redraw in the target language is kept;
transport faults on the way are retried; records say what was redrawn; the verifier is not LCB's scorer."""

from __future__ import annotations

import json
import threading

from generation_helpers import API_KEY, FaultServer, prompts

from mlft.generation.backends.openai import OpenAIBackend
from mlft.generation.decoding import Decoding
from mlft.generation.interventions import build_interventions
from mlft.generation.prompting import Prompting
from mlft.generation.runner import generate_completions

ENGLISH = "This is an English sentence about the weather today.\n"
FRENCH = ["Il fait très beau aujourd'hui dans toute la ville.\n", "Les enfants jouent dans le parc avec leurs amis.\n"]


class ScriptedModel:
    """Per conversation: the first draw of each line is English, a redraw is the French line; two lines, then
    end of reply. A reply to the prompt 'cutoff ...' also gets its first request's body cut off (FaultServer)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.draws: dict[tuple[str, int], int] = {}

    def __call__(self, body):
        messages = body["messages"]
        prefix = messages[-1]["content"] if messages[-1]["role"] == "assistant" else ""
        line = prefix.count("\n")
        with self.lock:
            key = (messages[0]["content"], line)
            self.draws[key] = self.draws.get(key, 0) + 1
            draw = self.draws[key]
        if line >= 2:
            return "", "stop"
        return (ENGLISH if draw == 1 else FRENCH[line]).rstrip("\n"), "stop"  # the server strips the stop string


def test_line_resampling_keeps_target_language_lines_over_the_api(tmp_path):
    model = ScriptedModel()
    ps = prompts(["Décris le temps qu'il fait.", "cutoff: parle-moi de Paris."], language="fr")
    (iv,) = build_interventions([{"name": "line_resample", "tries": 3}], "test")
    assert iv.options.verifier == "py3langid"  # not the fastText model that scores LCB
    with FaultServer(reply=model) as server:
        backend = OpenAIBackend(
            "served", base_url=server.url, api_key=API_KEY, concurrency=2, timeout=2, max_retries=3, backoff=0.01
        )
        done = generate_completions(
            ps,
            backend,
            Decoding(max_new_tokens=60),
            Prompting(),
            tmp_path / "c.jsonl",
            "served",
            progress=False,
            interventions=[iv],
        )
        bodies = list(server.bodies)
    assert len(done) == 2
    for rec in done:
        assert rec["completion"] == (FRENCH[0] + FRENCH[1]).rstrip("\n")
        assert rec["line_resample"]["lines"] == 2 and rec["line_resample"]["redrawn_lines"] == 2
        assert rec["interventions"] == [iv.describe()]
    assert all(b.get("stop") == ["\n"] for b in bodies)
    continued = [b for b in bodies if b["messages"][-1]["role"] == "assistant"]
    assert continued and all(b["continue_final_message"] and not b["add_generation_prompt"] for b in continued)
    assert continued[0]["messages"][-1]["content"] in (FRENCH[0],)
    assert server.attempts["cutoff: parle-moi de Paris."] >= 2  # the cut-off body was retried
    lines = [json.loads(x) for x in (tmp_path / "c.jsonl").read_text().splitlines()]
    assert len(lines) == 2 and not any(r["error"] for r in lines)
