"""Polyglot suite: validation up front, rows, and a tiny real CKA run through run_suite."""

import pytest

from mlft.errors import ConfigError
from mlft.evals.polyglot import kind
from mlft.evals.suite import load_suite


def test_validation_errors(tmp_path):
    with pytest.raises(ConfigError, match=r"options.languages\[1\]: unknown Polyglot-or-Not language 'xx'"):
        kind.parse_options({"languages": ["de", "xx"]}, "p.yaml: options")
    with pytest.raises(ConfigError, match="options.sample: must be >= 1"):
        kind.parse_options({"sample": 0}, "p.yaml: options")
    with pytest.raises(ConfigError, match=r"no Polyglot-or-Not data for de"):
        kind.parse_options({"languages": ["de"], "data_dir": str(tmp_path)}, "p.yaml: options")
    with pytest.raises(ConfigError, match=r"polyglot_quick.yaml: unknown key 'samples' \(did you mean 'sample'"):
        load_suite("polyglot_quick", ["samples=3"])


@pytest.mark.slow
def test_run_suite_rows(embedded_model, shared, tmp_path):
    from mlft.evals.runner import run_suite
    from mlft.generation.target import Target

    model, tok = embedded_model
    s = load_suite(
        "polyglot_quick", ["languages=[en, fr]", "sample=12", f"data_dir={shared / 'polyglot'}", "bootstrap=500"]
    )
    result = run_suite(s, Target(model=model, tokenizer=tok), tmp_path, progress=False)
    val = {(r["task"], r["language"], r["metric"]): r["value"] for r in result.rows}
    assert val["cka", "en", "n_facts"] == 12
    assert val["cka", "avg", "accuracy"] == pytest.approx(
        (val["cka", "en", "accuracy"] + val["cka", "fr", "accuracy"]) / 2
    )
    assert all(set(r) == {"suite", "variant", "task", "language", "metric", "value"} for r in result.rows)
    rel = [r for r in result.rows if r["task"].startswith("relation:") and r["language"] == "en"]
    assert rel and all(0 <= r["value"] <= 1 for r in rel)
    lines = (tmp_path / "facts.jsonl").read_text().splitlines()
    assert len(lines) == 24
