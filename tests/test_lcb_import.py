"""The front door on a user's clone: no ../shared beside it, no $MLFT_LCB_DATA, an empty cache. `mlft data lcb --from
PATH` imports the LCB files into the cache (checksum-checked), after which the demo's data step finds the prompts;
without the import, and with the download failing (no network), the demo refuses with a typed error that names
both offline ways. No model: only the data step runs."""

import urllib.request

import pytest

import mlft.generation.prompting as prompting
import mlft.paths as paths
from mlft.benchmarks.lcb.data import load_prompts
from mlft.benchmarks.lcb.fetch import TEST_SETS, WORDS, import_files, lcb_cache
from mlft.cli import main
from mlft.commands.demo import experiment
from mlft.errors import DataError, MissingDataError

demo = experiment()  # recipes/demo.py, the script behind `mlft demo`


@pytest.fixture
def clone(tmp_path, monkeypatch):
    """A temp folder standing for a user's clone: cwd there, no ../shared, no $MLFT_LCB_DATA, an empty cache, and
    no network (every download fails at once)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFT_LCB_DATA", raising=False)
    monkeypatch.delenv("MLFT_SHARED", raising=False)
    monkeypatch.setenv("MLFT_CACHE", str(tmp_path / "cache"))
    for module in (prompting, paths):  # the demo's data step: mlft.ensure_lcb_data
        monkeypatch.setattr(module, "shared_dir", lambda: None)
    urls = []

    def offline(url, *a, **k):
        urls.append(getattr(url, "full_url", url))
        raise OSError("no network in this test")

    monkeypatch.setattr(urllib.request, "urlopen", offline)
    assert not lcb_cache().exists()
    return urls


def test_demo_refuses_without_import_and_names_both_ways(clone, capsys):
    with pytest.raises(MissingDataError) as exc:
        demo._ensure_lcb_data()
    msg = str(exc.value)
    assert "mlft data lcb --from PATH" in msg and "MLFT_LCB_DATA=PATH" in msg
    assert "test_sets.zip" in msg and "words" in msg and "the download failed" in msg
    assert any(TEST_SETS.url == u for u in clone)  # it tried the checksum-checked download first
    # the CLI turns the typed error into a message and exit code 2, no traceback
    code = main(["demo", "--out", "runs/demo"])
    err = capsys.readouterr().err
    assert code == 2 and "mlft data lcb --from PATH" in err and "MLFT_LCB_DATA" in err and "Traceback" not in err


@pytest.mark.parametrize("what", ["zip", "folder"])
def test_demo_finds_the_prompts_after_lcb_from(clone, shared, capsys, what):
    src = shared / "lcb" / ("test_sets.zip" if what == "zip" else "")
    assert main(["data", "lcb", "--from", str(src)]) == 0
    out = capsys.readouterr().out
    assert "imported into" in out and "total: 6586 prompts" in out
    assert (lcb_cache() / "test_sets.zip").is_file()
    if what == "zip":  # a zip alone brings no word list: the demo still refuses, naming what is missing
        with pytest.raises(MissingDataError, match=r"needs the LCB file\(s\) words:"):
            demo._ensure_lcb_data()
        assert clone == [WORDS.url]  # it tried to download the word list only
        clone.clear()
        assert main(["data", "lcb", "--from", str(shared / "lcb")]) == 0
    assert {"words", "few_shot_examples.json", "outputs"} <= {p.name for p in lcb_cache().iterdir()}
    files = demo._ensure_lcb_data(full=True)  # --full also needs the few-shot examples
    assert files["test_sets.zip"] == lcb_cache() / "test_sets.zip" and files["words"] == lcb_cache() / "words"
    assert len(load_prompts()) == 6586  # what the demo's suite loads: from the cache, no download
    assert not clone  # nothing was downloaded


def test_import_of_an_extracted_folder_and_bad_files(clone, shared, tmp_path):
    import zipfile

    extracted = tmp_path / "extracted"
    with zipfile.ZipFile(shared / "lcb" / "test_sets.zip") as zf:
        zf.extractall(extracted)
    (extracted / "words").write_bytes((shared / "lcb" / "words").read_bytes())
    got = import_files(extracted)
    assert {"test_sets", "words"} <= set(got.files) and "few_shot_examples.json" in got.missing
    assert len(load_prompts(["monolingual"])) == 2400  # the imported folder, verified, read from the cache
    demo._ensure_lcb_data()
    # a modified copy never reaches the cache
    csv = next(extracted.glob("test_sets/monolingual/okapi/*.csv"))
    csv.write_text(csv.read_text(encoding="utf-8") + "extra,row,x\n", encoding="utf-8")
    with pytest.raises(DataError, match="not the official extracted test_sets"):
        import_files(extracted)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / WORDS.name).write_text("not the word list\n")
    with pytest.raises(DataError, match="sha256 mismatch"):
        import_files(bad)
