"""A lab's workflow: the callback's numbers reach TensorBoard (per language, with intervals, sample completions),
runs are named after their recipe, a finished run gets a model card, and `push_to_hub` uploads final/ with it."""

from __future__ import annotations

import base64
import gzip
import json
import re

import pytest

from tests.training_helpers import TINY

pytestmark = pytest.mark.slow
SFT = "recipes/cpu/multilingual_sft.yaml"


@pytest.fixture(scope="module")
def tracked_run(tmp_path_factory, shared):
    import os

    from mlft.training.recipe import load_recipe
    from mlft.training.train import train

    os.environ["MLFT_LCB_DATA"] = str(shared / "lcb")
    run_dir = tmp_path_factory.mktemp("tracked") / "run"
    recipe = load_recipe(
        SFT,
        [
            *TINY,
            f"run_dir={run_dir}",
            "training_args.max_steps=1",
            "training_args.report_to=[tensorboard]",
            "evaluation.at_start=false",
        ],
    )
    train(recipe, progress=False)
    return run_dir


def _events(run_dir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (events,) = list((run_dir / "checkpoints" / "runs").glob("*/events.out.tfevents.*"))
    acc = EventAccumulator(str(events.parent), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    return acc


def test_tensorboard_gets_per_language_numbers_intervals_and_samples(tracked_run):
    acc = _events(tracked_run)
    tags = set(acc.Tags()["scalars"])
    for tag in [
        "lcb/model/crosslingual/lpr",
        "lcb/model/crosslingual/lpr/de",
        "lcb/model/crosslingual/lpr_low",
        "lcb/model/crosslingual/lpr_high/zh",
        "lcb/model/monolingual/coverage",
        "lcb/model/crosslingual/wpr/ar",
        "lcb/model/monolingual/degeneracy/ar",
    ]:
        assert tag in tags, sorted(tags)[:40]
    curves = [json.loads(x) for x in (tracked_run / "curves.jsonl").read_text().splitlines()]
    want = next(r for r in curves if (r["task"], r["language"], r["metric"]) == ("crosslingual", "de", "lpr"))
    (event,) = acc.Scalars("lcb/model/crosslingual/lpr/de")
    assert event.step == 1 and event.value == pytest.approx(want["value"])
    low = acc.Scalars("lcb/model/crosslingual/lpr_low")[0].value
    assert low <= acc.Scalars("lcb/model/crosslingual/lpr")[0].value
    text = acc.Tensors("lcb/model/samples/text_summary")
    sample = text[0].tensor_proto.string_val[0].decode()
    assert "| task | language | prompt | reply | verdict |" in sample and "crosslingual" in sample


def test_run_is_named_after_the_recipe_and_gets_a_model_card(tracked_run):
    acc = _events(tracked_run)
    args = json.loads(acc.Tensors("args/text_summary")[0].tensor_proto.string_val[0].decode())
    assert args["run_name"] == "multilingual_sft"
    card = (tracked_run / "final" / "README.md").read_text()
    assert "base model: `smollm2-135m-instruct`" in card and "## Data mix" in card
    assert "| seed_english | en |" in card and "LCB hold-out" in card and "request phrasings: 0" in card
    assert "| crosslingual |" in card and "[" in card  # the last LCB numbers with intervals
    assert "mlft train run/recipe.yaml" in card


def test_push_to_hub_uploads_final_with_its_card(tracked_run, monkeypatch):
    from mlft.training import card

    calls = []

    class FakeApi:
        def create_repo(self, **kw):
            calls.append(("create_repo", kw))

        def upload_folder(self, **kw):
            calls.append(("upload_folder", kw))
            return type("Info", (), {"commit_url": "https://hf.co/org/name/commit/1"})()

    assert card.push(tracked_run, "org/name", private=True, api=FakeApi()) == "https://hf.co/org/name/commit/1"
    assert calls[0] == ("create_repo", {"repo_id": "org/name", "private": True, "exist_ok": True, "repo_type": "model"})
    kind, kw = calls[1]
    assert kind == "upload_folder" and kw["folder_path"] == str(tracked_run / "final") and kw["repo_id"] == "org/name"


def test_push_to_hub_is_a_recipe_key_checked_up_front():
    from mlft.errors import ConfigError
    from mlft.training.recipe import load_recipe

    assert load_recipe(SFT, ["push_to_hub=org/name"]).push_to_hub == "org/name"
    with pytest.raises(ConfigError, match="push_to_hub: expected a repo id"):
        load_recipe(SFT, ["push_to_hub=noslash"])
    with pytest.raises(ConfigError, match="training_args.push_to_hub: managed by mlft"):
        load_recipe(SFT, ["training_args.push_to_hub=true"])


def test_finished_run_gets_its_report_page(tracked_run):
    """The eval callback writes the run's page (curves, every checkpoint's replies) when training ends."""
    html = (tracked_run / "report.html").read_text(encoding="utf-8")
    assert '"label": "step 1 · model"' in html
    replies = json.loads(gzip.decompress(base64.b64decode(re.search(r'id="view-0">([^<]*)<', html).group(1))))
    done = (tracked_run / "evals" / "step-000001" / "model" / "default" / "completions.jsonl").read_text()
    assert sorted(r[0] for r in replies) == sorted(json.loads(x)["id"] for x in done.splitlines() if x.strip())
