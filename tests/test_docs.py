"""The documentation stays true to the code: every `mlft ...` command a doc page shows in a ```bash block parses
with mlft's own parser (`mlft.cli.parse_args`: no subprocess per command), an `mlft train` command's recipe passes
`--check` (load_recipe), an `mlft eval` command's suite exists; every repository path a page names (`mlft/...py`,
`eval/*.yaml`, `recipes/...`, ...) exists, every module a page names (`mlft.x.y`, `mlft.x.y.name`) exists and
defines that name, and every relative link points at a file (and heading) that exists. Docs speak of the project, not
of how the work was done: no page, docstring or comment says "issue <number>" or "finding <number>" (cite an upstream
bug by its URL).

A command holding an explicit placeholder written `<like-this>` is not parsed (there is nothing to check yet).
The negative tests feed made-up pages through the same checks: each must report its problem.
"""

import ast
import io
import re
import shlex
import tokenize
from itertools import product
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# every markdown page of the repository (README.md, docs/, the per-folder READMEs, measurements/ result pages); not
# outputs (runs/), hidden folders (.venv-vllm, caches) or the wheel's copies
_NOT_PAGES = {"runs", "outputs", "build", "dist", "shipped", "resources", "node_modules", "__pycache__"}
PAGES = sorted(
    p
    for p in ROOT.glob("**/*.md")
    if not any(
        part.startswith(".") or part in _NOT_PAGES or part.endswith(".egg-info")
        for part in p.relative_to(ROOT).parts[:-1]
    )
)

BASH_BLOCK = re.compile(r"^```bash\n(.*?)^```", re.S | re.M)
PLACEHOLDER = re.compile(r"<[A-Za-z][\w-]*>")
PATH = re.compile(
    r"(?<![\w./$-])((?:mlft|eval|recipes|data_mixes|configs|benchmarks|tests|slurm|docs)"
    r"/[\w./{},-]*[\w/}])"
)
LINK = re.compile(r"\]\(([^)\s]+)\)")
MODULE = re.compile(r"(?<![\w./$-])(mlft(?:\.[A-Za-z_]\w*)+)(?![\w/])")
# made-up modules the extension guide uses as examples of the user's own code
EXAMPLE_MODULES = {"mlft.evals.mykind", "mlft.generation.backends.mine"}
# how the work was done, not what the project is: an issue or a finding of one, by number (a URL's `issues/12` is fine)
PROCESS = re.compile(r"(?<![\w/])(?:issues?|findings?) #?\d+\b", re.I)


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
                    out.append(segment[segment.index("mlft") + 1 :])
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


def _module_file(parts: list[str]) -> Path | None:
    """The source of module `mlft.a.b` (parts ["mlft", "a", "b"]): mlft/a/b.py or mlft/a/b/__init__.py."""
    base = ROOT.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def module_problems(text: str, page: str) -> list[str]:
    """One message per dotted mlft name in the page (`mlft.benchmarks.lcb.guard`, `mlft.registry.Registry`,
    `python -m mlft.data.heldout`) whose module does not exist, or whose module does not define the name after it
    (a def, a class, an assignment or an import; read from the source, nothing is imported)."""
    problems = []
    for name in sorted(set(MODULE.findall(text)) - EXAMPLE_MODULES):
        parts = name.split(".")
        for n in range(len(parts), 0, -1):
            source = _module_file(parts[:n])
            if source is not None:
                break
        if source is None:
            problems.append(f"{page}: names {name}, which is not a module")
        elif n < len(parts):
            attr = re.escape(parts[n])
            defined = re.compile(
                rf"^\s*(?:(?:async\s+)?def|class)\s+{attr}\b|^\s*{attr}\s*[:=]"
                rf"|^\s*(?:from|import)\s.*\b{attr}\b"
                rf"|^\s*\"{attr}\":\s*\"mlft[\w.]*:\w+\",",  # a lazy public name (mlft/__init__.py's _PUBLIC)
                re.M,
            )
            if not defined.search(source.read_text(encoding="utf-8")):
                problems.append(f"{page}: names {name}, but {'.'.join(parts[:n])} defines no {parts[n]}")
    return problems


def process_problems(text: str, where: str) -> list[str]:
    """One message per "issue <number>" / "finding <number>" in a page, a docstring or a comment."""
    return [f"{where}: says '{m.group(0)}'" for m in PROCESS.finditer(text)]


def _python_prose(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every docstring and comment of a Python file (string literals in code are not prose)."""
    source = path.read_text(encoding="utf-8")
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = node.body[0] if node.body else None
            if isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant) and isinstance(doc.value.value, str):
                out.append((doc.lineno, doc.value.value))
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            out.append((tok.start[0], tok.string))
    return out


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


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_documented_modules_exist(page):
    assert module_problems(page.read_text(encoding="utf-8"), str(page.relative_to(ROOT))) == []


def test_docs_docstrings_and_comments_name_no_issue_numbers():
    """Pages, the docstrings and comments of mlft/, measurements/ and tests/, and the comments of the shipped YAML files
    (suites, recipes, mixes, configs) and scripts say what the project does, not which issue asked for it."""
    problems = []
    for page in PAGES:
        problems += process_problems(page.read_text(encoding="utf-8"), str(page.relative_to(ROOT)))
    py_files = [
        p
        for folder in ("mlft", "measurements", "tests")
        for p in (ROOT / folder).rglob("*.py")
        if "shipped" not in p.parts
    ]
    assert len(py_files) > 150
    for path in [*py_files, ROOT / "setup.py"]:
        for line, prose in _python_prose(path):
            problems += process_problems(prose, f"{path.relative_to(ROOT)}:{line}")
    other = [
        p
        for folder in ("eval", "recipes", "data_mixes", "configs", "slurm", "measurements", ".ci")
        for p in (ROOT / folder).rglob("*")
        if p.suffix in (".yaml", ".yml", ".sh", "") and p.is_file()
    ]
    for path in [*other, ROOT / "Makefile", ROOT / "pyproject.toml"]:
        for line, text in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if "#" in text:
                problems += process_problems(text[text.index("#") :], f"{path.relative_to(ROOT)}:{line}")
    assert problems == []


def test_pages_are_found_and_hold_commands():
    """The checks above would pass vacuously if the pages or their commands were not found."""
    names = {str(p.relative_to(ROOT)) for p in PAGES}
    assert names >= {
        "README.md",
        "docs/README.md",
        "docs/rl.md",
        "docs/report.md",
        "eval/README.md",
        "recipes/README.md",
        "measurements/README.md",
        "measurements/gpu/README.md",
        "docs/results/README.md",
    }
    assert len(PAGES) >= 16 and not any(n.startswith(("runs/", ".")) for n in names)
    commands = [c for p in PAGES for c in _commands(p.read_text(encoding="utf-8"))]
    assert len(commands) >= 60
    assert {c[0] for c in commands} >= {
        "data",
        "score",
        "generate",
        "eval",
        "train",
        "build",
        "compare",
        "show",
        "demo",
        "env",
        "harness",
        "evaluate-run",
    }
    assert {tuple(c[:2]) for c in commands} >= {
        ("data", "lcb"),
        ("data", "mix"),
        ("build", "steer"),
        ("build", "gate"),
        ("show", "table"),
        ("show", "curves"),
        ("show", "card"),
        ("show", "report"),
    }
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "make demo   # installs everything, then runs the main job on the embedded SmolLM2-135M-Instruct" in readme
    assert "make test   # installs everything, then runs the test suite (exactly what CI runs: .ci/run)" in readme


def test_a_made_up_page_fails():
    page = """Intro naming mlft/nowhere.py, eval/lcb_tiny.yaml, configs/accelerate/{ddp,nope}.yaml and
[a link](docs/missing.md), [an anchor](README.md#no-such-heading), [fine](README.md#documentation).
Modules: `mlft.benchmarks.lcb.guard`, `mlft.registry.Registry`, `python -m mlft.data.heldout`, `mlft.evals.mykind`
(the guide's example), `mlft.paths.resource_dirs(folder)` and `mlft.lcb.guard`, `mlft.stats.no_such_function`,
`mlft.score(path)`, `mlft.no_such_verb(path)`,
`mlft.paths.resource_dir`. Upstream: https://github.com/huggingface/trl/issues/12 and [trl#12](https://x.org/issue-12);
ours: Issue 12's mitigation (issue #7, finding 3).

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
    assert paths == [
        "made-up.md: names configs/accelerate/nope.yaml, which does not exist",
        "made-up.md: names docs/missing.md, which does not exist",
        "made-up.md: names mlft/nowhere.py, which does not exist",
        "made-up.md: names recipes/cpu/nope.yaml, which does not exist",
        "made-up.md: link README.md#no-such-heading: no heading #no-such-heading in README.md",
        "made-up.md: link docs/missing.md: no file docs/missing.md",
    ], paths
    assert module_problems(page, "made-up.md") == [
        "made-up.md: names mlft.lcb.guard, but mlft defines no lcb",
        "made-up.md: names mlft.no_such_verb, but mlft defines no no_such_verb",
        "made-up.md: names mlft.paths.resource_dir, but mlft.paths defines no resource_dir",
        "made-up.md: names mlft.stats.no_such_function, but mlft.stats defines no no_such_function",
    ]
    assert process_problems(page, "made-up.md") == [
        "made-up.md: says 'Issue 12'",
        "made-up.md: says 'issue #7'",
        "made-up.md: says 'finding 3'",
    ]


def test_issue_numbers_are_found_in_docstrings_and_comments_only(tmp_path):
    number = "issue " + "7"
    source = tmp_path / "m.py"
    source.write_text(
        "\n".join(
            [
                f'"""Module ({number})."""',
                "",
                "def f():",
                f'    """Finding 2: {number}."""',
                f"    return 'not prose: {number}'  # the {number} comment",
                "",
            ]
        )
    )
    found = [p for line, prose in _python_prose(source) for p in process_problems(prose, f"m.py:{line}")]
    assert found == [
        "m.py:1: says 'issue 7'",
        "m.py:4: says 'Finding 2'",
        "m.py:4: says 'issue 7'",
        "m.py:5: says 'issue 7'",
    ], found
