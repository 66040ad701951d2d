"""The documentation stays true to the code: every `mlft ...` command a doc page shows in a ```bash block parses
with mlft's own parser (`mlft.cli.parse_args`: no subprocess per command), an `mlft train` command's recipe passes
`--check` (load_recipe), an `mlft eval` command's suite exists; every repository path a page names (`mlft/...py`,
`eval/*.yaml`, `recipes/...`, ...) exists, and every relative link points at a file (and heading) that exists.

A command holding an explicit placeholder written `<like-this>` is not parsed (there is nothing to check yet).
The negative tests feed made-up pages through the same checks: each must report its problem.
"""

import re
import shlex
from itertools import product
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted({ROOT / "README.md", *(ROOT / "docs").glob("*.md"), ROOT / "eval" / "README.md",
                ROOT / "recipes" / "README.md", ROOT / "benchmarks" / "README.md"})

BASH_BLOCK = re.compile(r"^```bash\n(.*?)^```", re.S | re.M)
PLACEHOLDER = re.compile(r"<[A-Za-z][\w-]*>")
PATH = re.compile(r"(?<![\w./$-])((?:mlft|eval|recipes|data_mixes|configs|benchmarks|tests|slurm|docs)"
                  r"/[\w./{},-]*[\w/}])")
LINK = re.compile(r"\]\(([^)\s]+)\)")

def _commands(text: str) -> list[list[str]]:
    """argv (after `mlft`) of every mlft command in the page's bash blocks: continuation lines joined, comments
    and leading VAR=value assignments dropped, `a && b` split; `accelerate launch ... -m mlft ARGS` gives ARGS."""
    out = []
    for block in BASH_BLOCK.findall(text):
        for line in block.replace("\\\n", " ").splitlines():
            if PLACEHOLDER.search(line.split("#", 1)[0]):
                continue
            tokens = shlex.split(line, comments=True)
            segment: list[str] = []
            for tok in [*tokens, "&&"]:
                if tok not in ("&&", "||", ";", "|"):
                    segment.append(tok)
                    continue
                while segment and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", segment[0]):
                    segment.pop(0)
                if segment[:1] == ["mlft"]:
                    out.append(segment[1:])
                elif "mlft" in segment and segment[segment.index("mlft") - 1] == "-m":
                    out.append(segment[segment.index("mlft") + 1:])
                segment = []
    return out


def command_problems(text: str, page: str) -> list[str]:
    """One message per documented mlft command that does not parse (or whose recipe / suite does not exist)."""
    from mlft.cli import make_parser, parse_args
    from mlft.errors import MlftError
    from mlft.evals.suite import suite_path

    parser, problems = make_parser(), []
    for argv in _commands(text):
        where = f"{page}: `mlft {shlex.join(argv)}`"
        try:
            args = parse_args(argv, parser)
        except SystemExit:
            problems.append(f"{where}: does not parse")
            continue
        try:
            if args.command == "train":  # what `mlft train RECIPE --check` does (no model, no data)
                from mlft.training.recipe import load_recipe

                try:
                    load_recipe(args.recipe, args.overrides)
                except MlftError as exc:
                    # a chained recipe (DPO / GRPO on an SFT run) names the run an earlier command trains: the rest
                    # of the recipe is checked with the embedded model in its place
                    if "train the recipe that produces it first" not in str(exc):
                        raise
                    load_recipe(args.recipe, [*args.overrides, "model=smollm2-135m-instruct"])
            elif args.command == "eval":
                suite_path(args.suite)
        except MlftError as exc:
            problems.append(f"{where}: {exc}")
    return problems


def _expand(path: str) -> list[str]:
    """`configs/accelerate/{single,ddp}.yaml` -> both paths."""
    parts = re.split(r"\{([^{}]*)\}", path)
    choices = [[p] if i % 2 == 0 else p.split(",") for i, p in enumerate(parts)]
    return ["".join(c) for c in product(*choices)]


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation but `-` and `_` dropped, spaces to `-`."""
    heads = re.findall(r"^#+ (.+)$", BASH_BLOCK.sub("", page.read_text(encoding="utf-8")), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in heads}


def path_problems(text: str, page: str, folder: Path = ROOT) -> list[str]:
    """One message per repository path or relative link in the page that does not exist."""
    problems = []
    for raw in sorted(set(PATH.findall(text))):
        if "*" in raw:
            continue
        for rel in _expand(raw.rstrip(".,")):
            if not (ROOT / rel).exists():
                problems.append(f"{page}: names {rel}, which does not exist")
    for link in sorted(set(LINK.findall(text))):
        if re.match(r"[a-z]+:", link):
            continue  # http(s):, mailto:
        target, _, anchor = link.partition("#")
        dest = (folder / target).resolve() if target else None
        if dest is not None and not dest.exists():
            problems.append(f"{page}: link {link}: no file {target}")
        elif anchor and dest is not None and dest.suffix == ".md" and anchor not in _anchors(dest):
            problems.append(f"{page}: link {link}: no heading #{anchor} in {target}")
    return problems


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_documented_commands_parse(page):
    text = page.read_text(encoding="utf-8")
    assert command_problems(text, str(page.relative_to(ROOT))) == []


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_documented_paths_and_links_exist(page):
    text = page.read_text(encoding="utf-8")
    assert path_problems(text, str(page.relative_to(ROOT)), page.parent) == []


def test_pages_are_found_and_hold_commands():
    """The checks above would pass vacuously if the pages or their commands were not found."""
    assert len(PAGES) == 12 and all(p.is_file() for p in PAGES)
    commands = [c for p in PAGES for c in _commands(p.read_text(encoding="utf-8"))]
    assert len(commands) >= 60
    assert {c[0] for c in commands} >= {"lcb", "score", "generate", "eval", "train", "steer", "gate", "compare",
                                        "table", "demo", "env", "harness", "evaluate-run", "mix", "curves", "card",
                                        "report"}
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "make demo   # installs everything, then runs the main job on the embedded SmolLM2-135M-Instruct" in readme
    assert "make test   # installs everything, then runs the test suite (exactly what CI runs: .ci/run)" in readme


def test_a_made_up_page_fails():
    page = """Intro naming mlft/nowhere.py, eval/lcb_tiny.yaml, configs/accelerate/{ddp,nope}.yaml and
[a link](docs/missing.md), [an anchor](README.md#no-such-heading), [fine](README.md#usage).

```bash
mlft eval lcb_quick --no-such-flag             # a flag that does not exist
mlft frobnicate                                # a subcommand that does not exist
mlft eval lcb_quikc                            # a suite that does not exist
mlft train recipes/cpu/crosslingual_sft.yaml training_args.no_such_arg=1
MLFT_X=1 mlft score c.jsonl --format yaml && mlft score c.jsonl
accelerate launch -m mlft recipes/cpu/nope.yaml
mlft train <your-recipe> --check               # a placeholder: not parsed
mlft score c.jsonl --format json \\
    --no-guard
```
"""
    problems = command_problems(page, "made-up.md")
    assert len(problems) == 6, problems
    assert "`mlft eval lcb_quick --no-such-flag`: does not parse" in problems[0]
    assert "`mlft frobnicate`: does not parse" in problems[1]
    assert "unknown eval suite 'lcb_quikc'" in problems[2] and "did you mean 'lcb_quick'" in problems[2]
    assert "no_such_arg" in problems[3]
    assert "`mlft score c.jsonl --format yaml`: does not parse" in problems[4]
    assert "recipes/cpu/nope.yaml" in problems[5]
    paths = path_problems(page, "made-up.md")
    assert paths == ["made-up.md: names configs/accelerate/nope.yaml, which does not exist",
                     "made-up.md: names docs/missing.md, which does not exist",
                     "made-up.md: names mlft/nowhere.py, which does not exist",
                     "made-up.md: names recipes/cpu/nope.yaml, which does not exist",
                     "made-up.md: link README.md#no-such-heading: no heading #no-such-heading in README.md",
                     "made-up.md: link docs/missing.md: no file docs/missing.md"], paths
