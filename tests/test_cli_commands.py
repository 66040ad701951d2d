"""The front door's shape: `mlft --help` lists at most 12 commands, the nouns grouped under `mlft data`,
`mlft show` and `mlft build`; every old spelling still runs, hidden from the list, parsing to exactly the namespace
of its new spelling (the same `run`, the same arguments) and saying its new name on stderr in one line."""

from __future__ import annotations

import re
import sys
import types

import pytest

from mlft import cli
from mlft.cli import COMMANDS, make_parser, parse_args
from mlft.commands.renamed import MOVED, RENAMED

MAX_COMMANDS = 12

# old spelling -> its new spelling, with the same arguments: every entry of RENAMED (each action) is here
OLD_NEW = [
    ("lcb --from lcb_copy --task monolingual", "data lcb --from lcb_copy --task monolingual"),
    ("multisense fetch --task pawsx --dest d", "data multisense --task pawsx --dest d"),
    ("multisense replay ref", "show multisense ref"),
    ("polyglot fetch --language de", "data polyglot --language de"),
    ("mix m.yaml total=5 --out o", "data mix m.yaml total=5 --out o"),
    ("mix filter d --pass p --out o", "data mix filter d --pass p --out o"),
    ("table spec.yaml --format csv", "show table spec.yaml --format csv"),
    ("curves r1 r2 --no-heatmaps", "show curves r1 r2 --no-heatmaps"),
    ("report r --out x.html", "show report r --out x.html"),
    ("card r --print", "show card r --print"),
    ("paper-tables --format csv", "show paper-tables --format csv"),
    ("steer build --out v.safetensors --method lda", "build steer --out v.safetensors --method lda"),
    ("gate train --out g.safetensors --epochs 2", "build gate --out g.safetensors --epochs 2"),
]
OLD_NEW = [(old.split(), new.split()) for old, new in OLD_NEW]


def listed_commands(parser) -> list[str]:
    """The commands `mlft --help` lists (read from its text: the indented names under COMMAND)."""
    text = parser.format_help()
    section = text.split("  COMMAND\n", 1)[1].split("\noptions:", 1)[0]
    return re.findall(r"^ {4}(\S+)", section, re.M)


def check_front(parser) -> list[str]:
    listed = listed_commands(parser)
    assert 0 < len(listed) <= MAX_COMMANDS, f"`mlft --help` lists {len(listed)} commands: {', '.join(listed)}"
    return listed


def test_help_lists_at_most_twelve_commands_and_no_old_spelling():
    listed = check_front(make_parser())
    assert listed == [c.replace("_", "-") for c in COMMANDS]
    assert not set(listed) & {*RENAMED, "results"}


def test_a_thirteenth_command_fails_the_check(monkeypatch):
    """The check sees a command planted beside the twelve."""
    planted = types.ModuleType("mlft.commands.planted")
    planted.add_parser = lambda sub: sub.add_parser("planted", help="a thirteenth command")
    monkeypatch.setitem(sys.modules, "mlft.commands.planted", planted)
    monkeypatch.setattr(cli, "COMMANDS", [*COMMANDS, "planted"])
    with pytest.raises(AssertionError, match="lists 13 commands"):
        check_front(cli.make_parser())


def test_every_old_spelling_has_a_case():
    covered = {old[0] for old, _ in OLD_NEW}
    assert covered == set(RENAMED)
    actions = {(old[0], old[1]) for old, _ in OLD_NEW}
    for name, (new, _) in RENAMED.items():
        if isinstance(new, dict):  # an old spelling with actions: each action has its case
            assert {(name, a) for a in new} <= actions


@pytest.mark.parametrize(("old", "new"), OLD_NEW, ids=[" ".join(o[:2]) for o, _ in OLD_NEW])
def test_old_spelling_parses_to_the_new_one_and_says_so(old, new, capsys):
    parser = make_parser()
    got_new = vars(parse_args(new, parser))
    assert capsys.readouterr().err == ""
    got_old = vars(parse_args(old, parser))
    assert got_old == got_new and got_new["func"].__module__.startswith("mlft.commands.")
    err = capsys.readouterr().err
    typed = " ".join(old[:2]) if old[0] in ("multisense", "polyglot", "steer", "gate") else old[0]
    spelled = " ".join(new[:2]) if new[0] in ("data", "show", "build") else new[0]
    assert err == f"mlft {typed}: renamed to `mlft {spelled}`; the old name goes in the next release\n"


def test_an_old_spelling_runs_and_its_error_names_the_new_one(tmp_path, capsys):
    """`mlft card DIR` runs `mlft show card`'s code: the same check of the run directory, reported under the new
    name, after the notice."""
    assert cli.main(["card", str(tmp_path)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "mlft card: renamed to `mlft show card`; the old name goes in the next release"
    assert err[1].startswith(f"mlft show card: error: {tmp_path}: not a finished run directory")
    assert cli.main(["show", "card", str(tmp_path)]) == 2
    assert capsys.readouterr().err.splitlines() == err[1:]


def test_old_data_mix_validates_as_the_new_one(capsys):
    """A whole command under both spellings: the same output (the plan of a shipped mix), the notice aside."""
    mix = "data_mixes/cpu/english_sft.yaml"
    assert cli.main(["data", "mix", mix, "total=20"]) == 0
    new = capsys.readouterr()
    assert cli.main(["mix", mix, "total=20"]) == 0
    old = capsys.readouterr()
    assert old.out == new.out and "20 rows" in new.out
    assert old.err == new.err + "mlft mix: renamed to `mlft data mix`; the old name goes in the next release\n"


def test_mlft_results_left_the_package(capsys):
    """`mlft results` renders the project's own docs numbers: a development tool of the source tree now
    (`python -m devtools.results`); the old name says where it went."""
    assert cli.main(["results", "docs/results/demo.json", "--check", "README.md"]) == 2
    assert capsys.readouterr().err.splitlines() == [MOVED]
    with pytest.raises(SystemExit) as exc:  # its help says it too
        cli.main(["results", "--help"])
    assert exc.value.code == 0 and " ".join(capsys.readouterr().out.split()).endswith(
        "`python -m devtools.results ARGS` options: -h, --help show this help message and exit"
    )


def test_a_recipe_file_alone_still_trains():
    assert parse_args(["recipes/cpu/english_sft.yaml", "training_args.max_steps=2"]).command == "train"
