"""Multisense suite: validation up front, the translate-then-answer pipeline (scripted chat), resume, real model."""

import json

import pytest

from mlft.errors import ConfigError
from mlft.evals.multisense import kind
from mlft.evals.suite import load_suite


class ScriptedChat:
    """Translations echo the text with quotes; answers follow the item's row parity, in the language of the
    instruction ("Yes."/"Ja."/"是。" on even rows, "No."/"Nein."/"否" on odd rows); X replies on odd rows decline."""

    WORDS = {"en": ("No.", "Yes."), "de": ("Nein.", "Ja."), "zh": ("否", "是。")}

    def __init__(self, fail_after=None):
        self.calls, self.fail_after = 0, fail_after

    def __call__(self, ids, texts, max_new_tokens):
        out = []
        for i, text in zip(ids, texts):
            self.calls += 1
            if self.fail_after is not None and self.calls > self.fail_after:
                raise KeyboardInterrupt
            if "/translate/" in i:
                out.append('"MT ' + text.split("\n", 1)[1] + '"')
            elif "/instruction/" in i:
                out.append(text.split("\n", 1)[1])  # keeps the quotes, as models do
            else:
                cond, row = i.split("/")[-2:]
                lang = i.split("/")[1][-2:] if cond in ("T", "I") else "en"
                even = int(row) % 2 == 0
                out.append("I cannot answer that." if cond == "X" and not even else self.WORDS[lang][even])
        return out


def _opts(shared, **kw):
    return kind.parse_options(
        {"tasks": ["pawsx"], "sample": 6, "targets": ["de", "zh"], "data_dir": str(shared / "multisense"), **kw},
        "test: options",
    )


def test_pipeline_metrics_and_resume(shared, tmp_path):
    opts = _opts(shared)
    chat = ScriptedChat(fail_after=20)
    with pytest.raises(KeyboardInterrupt):
        kind.evaluate(opts, chat_fn=chat, model_name="m", out_dir=tmp_path, progress=False)
    kept = len((tmp_path / "generations.jsonl").read_text().splitlines())
    assert kept > 0  # finished chunks survive the interruption
    chat = ScriptedChat()
    rows = kind.evaluate(opts, chat_fn=chat, model_name="m", out_dir=tmp_path, progress=False)
    # 6 items: T_src 6 + per target (12 sentence translations + 3 instruction pieces + 3 x 6 answers) = 72
    assert chat.calls == 72 - kept
    val = {(r["variant"], r["language"], r["metric"]): r["value"] for r in rows}
    # T (translated instruction, same answer pattern as T_src) agrees everywhere; X replies are invalid on
    # the "no" rows, so consistency drops there and consistency over valid pairs stays 1
    assert val["T", "de", "consistency"] == 1.0 and val["I", "zh", "consistency"] == 1.0
    items = [json.loads(x) for x in (tmp_path / "items.jsonl").read_text().splitlines()]
    n_yes = sum(1 for r in items if r.get("idx") is not None and r["idx"] % 2 == 0)
    assert 0 < n_yes < 6 and [r["T_src"]["pred"] for r in items if "idx" in r] == [
        int(r["idx"] % 2 == 0) for r in items if "idx" in r
    ]
    assert val["X", "de", "invalid_rate"] == pytest.approx(1 - n_yes / 6)
    assert val["X", "de", "consistency"] == pytest.approx(n_yes / 6)
    assert val["X", "de", "consistency_valid"] == 1.0
    assert val["X", "avg", "consistency"] == pytest.approx(n_yes / 6)
    assert all(set(r) == {"variant", "task", "language", "metric", "value"} for r in rows)
    assert ("translation", "zh", "bleu") in val
    instr = next(r for r in items if r.get("direction") == "en_to_de")["translated_instruction"]
    assert instr["prefix"].startswith("Do the following") and not instr["prefix"].startswith('"')
    first = next(r for r in items if r.get("idx") is not None)
    assert first["en_to_de/translation"][0].startswith("MT ")  # quotes stripped
    assert "multisense.md" in {p.name for p in tmp_path.iterdir()}
    # a complete rerun makes no model calls
    chat = ScriptedChat()
    assert kind.evaluate(opts, chat_fn=chat, model_name="m", out_dir=tmp_path, progress=False) == rows
    assert chat.calls == 0
    with pytest.raises(ConfigError, match="made with other settings"):
        kind.evaluate(_opts(shared, temperature=0.7), chat_fn=chat, model_name="m", out_dir=tmp_path, progress=False)


def test_validation_errors(shared, tmp_path):
    with pytest.raises(ConfigError, match=r"options.tasks\[0\]: unknown multisense task 'xnlii'.*'xnli'"):
        kind.parse_options({"tasks": ["xnlii"]}, "s.yaml: options")
    with pytest.raises(ConfigError, match=r"options.targets\[0\]: unknown multisense language 'fr'"):
        kind.parse_options({"targets": ["fr"]}, "s.yaml: options")
    with pytest.raises(ConfigError, match=r"unknown key 'sampel' \(did you mean 'sample'"):
        kind.parse_options({"sampel": 3}, "s.yaml: options")
    with pytest.raises(ConfigError, match="'en' is the source language"):
        kind.parse_options({"targets": ["en"]}, "s.yaml: options")
    with pytest.raises(ConfigError, match=r"test-en.tsv not found"):
        kind.parse_options({"data_dir": str(tmp_path)}, "s.yaml: options")
    with pytest.raises(ConfigError, match="multisense.yaml.conditions"):
        load_suite("multisense", ["conditions=[T, Y]"])


@pytest.mark.slow
def test_real_model_two_items(embedded_model, shared, tmp_path):
    model, tok = embedded_model
    opts = _opts(
        shared, sample=1, targets=["de"], conditions=["T"], max_new_tokens=4, translation_max_new_tokens=8, bleu=False
    )
    from mlft.evals.runner import EvalContext
    from mlft.generation.target import Target

    ctx = EvalContext(tmp_path, Target(model=model, tokenizer=tok), progress=False)
    rows = kind.evaluate(
        opts,
        chat_fn=kind.make_chat_fn(ctx.backend(batch_size=4), opts),
        model_name="m",
        out_dir=tmp_path,
        progress=False,
    )
    val = {(r["variant"], r["language"], r["metric"]): r["value"] for r in rows}
    assert val["T_src", "en", "accuracy"] in (0.0, 1.0) and val["T", "de", "consistency"] in (0.0, 1.0)
    recs = [json.loads(x) for x in (tmp_path / "generations.jsonl").read_text().splitlines()]
    assert len(recs) == 1 + 2 + 3 + 1 and all(isinstance(r["reply"], str) for r in recs)
