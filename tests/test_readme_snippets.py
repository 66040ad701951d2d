"""The README cannot rot: every fenced ```python and ```bash block of README.md is a snippet, and every snippet that
can run on CPU runs, as written, in one temporary folder (in page order, so a file one snippet writes is there for
the next): Python in a subprocess, bash with `mlft` meaning `python -m mlft` of this checkout, the LCB files from
../shared/lcb when it exists, the hub offline.

A snippet that cannot run here says so in an HTML comment just before its block, `<!-- snippet: KIND -->`:
`gpu` (a GPU, several GPUs, or a hub download), `served` (a server or an endpoint), `slow` (longer than a test may
take), `setup` (the make targets: they install). Those are checked to parse instead: every `mlft ...` command with
mlft's own parser (`mlft.cli.parse_args`), `accelerate launch ... -m mlft ARGS` by its ARGS (and its
`--config_file`, which must exist), Python with `ast.parse`, a `make X` by its target in the Makefile. A block without
a comment is `cpu`. The self-tests feed broken snippets (a wrong flag, a Python NameError, a missing config) through
the same runner and check that each is reported.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
SHARED_LCB = Path(os.environ.get("MLFT_SHARED", ROOT.parent / "shared")) / "lcb"  # as tests/conftest.py finds it
KINDS = {"cpu", "gpu", "served", "slow", "setup"}
PARSE_ONLY = KINDS - {"cpu"}
BLOCK = re.compile(r"(?:<!-- snippet: ([\w-]+) -->\n)?```(python|bash)\n(.*?)^```", re.S | re.M)
TIMEOUT_S = 600  # one snippet; the README's CPU snippets take about a minute each on a shared core


@dataclass
class Snippet:
    lang: str  # python | bash
    kind: str  # one of KINDS
    body: str
    line: int  # of the opening fence in the page

    def __str__(self) -> str:
        return f"README.md:{self.line} ({self.lang}, {self.kind})"


def snippets(text: str) -> list[Snippet]:
    """Every ```python / ```bash block of a page, with the kind its comment names (cpu without one)."""
    out = []
    for m in BLOCK.finditer(text):
        line = text.count("\n", 0, m.start()) + 1 + (1 if m.group(1) else 0)
        out.append(Snippet(m.group(2), m.group(1) or "cpu", m.group(3), line))
    return out


def commands(body: str) -> list[list[str]]:
    """argv of every command of a bash snippet: continuation lines joined, comments dropped, `a && b` split, leading
    VAR=value assignments dropped."""
    out = []
    for line in body.replace("\\\n", " ").splitlines():
        segment: list[str] = []
        for tok in [*shlex.split(line, comments=True), "&&"]:
            if tok not in ("&&", "||", ";", "|"):
                segment.append(tok)
                continue
            while segment and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", segment[0]):
                segment.pop(0)
            if segment:
                out.append(segment)
            segment = []
    return out


def _parse_mlft(argv: list[str], where: str) -> list[str]:
    from mlft.cli import make_parser, parse_args

    try:
        parse_args(argv, make_parser())
    except SystemExit:
        return [f"{where}: `mlft {shlex.join(argv)}` does not parse"]
    return []


def parse_problems(snippet: Snippet) -> list[str]:
    """What is wrong with a snippet without running it (one message per problem)."""
    if snippet.kind not in KINDS:
        return [f"{snippet}: unknown snippet kind {snippet.kind!r} (one of {', '.join(sorted(KINDS))})"]
    if snippet.lang == "python":
        try:
            ast.parse(snippet.body)
        except SyntaxError as exc:
            return [f"{snippet}: Python does not parse: {exc}"]
        return []
    problems = []
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for argv in commands(snippet.body):
        if argv[0] == "mlft":
            problems += _parse_mlft(argv[1:], str(snippet))
        elif argv[:2] == ["accelerate", "launch"]:
            if "-m" not in argv or argv[argv.index("-m") + 1 : argv.index("-m") + 2] != ["mlft"]:
                problems.append(f"{snippet}: `{shlex.join(argv)}` launches no `-m mlft`")
                continue
            launch = argv[2 : argv.index("-m")]
            if "--config_file" in launch:
                config = launch[launch.index("--config_file") + 1]
                if not (ROOT / config).is_file():
                    problems.append(f"{snippet}: accelerate --config_file {config}: no such file")
            problems += _parse_mlft(argv[argv.index("-m") + 2 :], str(snippet))
        elif argv[0] == "make":
            problems += [
                f"{snippet}: make {t}: no such target in the Makefile"
                for t in argv[1:]
                if not re.search(rf"^{re.escape(t)}:", makefile, re.M)
            ]
        elif argv[0] == "vllm":
            for i, tok in enumerate(argv):  # a plugin class named by module path must exist in the checkout
                if tok == "--logits-processors":
                    module, _, name = argv[i + 1].partition(":")
                    source = ROOT.joinpath(*module.split(".")).with_suffix(".py")
                    if not source.is_file() or not re.search(rf"^class {name}\b", source.read_text(), re.M):
                        problems.append(f"{snippet}: --logits-processors {argv[i + 1]}: no such class")
        else:
            problems.append(f"{snippet}: `{argv[0]}`: not a command the README check knows (mlft, accelerate, make)")
    return problems


def environment() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    if SHARED_LCB.is_dir() and "MLFT_LCB_DATA" not in env:
        env["MLFT_LCB_DATA"] = str(SHARED_LCB)
    return env


def run_problem(snippet: Snippet, cwd: Path, timeout: float = TIMEOUT_S) -> str | None:
    """Run one snippet in `cwd`; None when it succeeds, else what failed (the tail of its output)."""
    if snippet.lang == "python":
        cmd = [sys.executable, "-c", snippet.body]
    else:
        script = f'set -euo pipefail\nmlft() {{ "{sys.executable}" -m mlft "$@"; }}\n{snippet.body}'
        cmd = ["bash", "-c", script]
    try:
        done = subprocess.run(cmd, cwd=cwd, env=environment(), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"{snippet}: did not finish in {timeout:.0f} s"
    if done.returncode == 0:
        return None
    tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-8:])
    return f"{snippet}: exit {done.returncode}\n{tail}"


# ---------------------------------------------------------------------------------------------------- the README


def test_readme_snippets_are_found_and_marked():
    found = snippets(README.read_text(encoding="utf-8"))
    kinds = {s.kind for s in found}
    assert kinds <= KINDS, kinds
    assert {"cpu", "gpu", "served", "setup"} <= kinds
    assert sum(s.lang == "python" for s in found) >= 3 and sum(s.kind == "cpu" for s in found) >= 5
    launches = [c for s in found for c in commands(s.body) if c[:2] == ["accelerate", "launch"]]
    assert launches and all(s.kind != "cpu" for s in found if "accelerate launch" in s.body)


@pytest.mark.slow
def test_every_snippet_parses():
    problems = [p for s in snippets(README.read_text(encoding="utf-8")) for p in parse_problems(s)]
    assert problems == []


@pytest.mark.slow
def test_every_cpu_snippet_runs(tmp_path, shared):
    """The CPU snippets in page order in one folder: the CSV the first one writes is scored by the next, the run the
    training snippet writes is compared, plotted and re-evaluated by the ones after it. `shared`: LCB's files (a
    clone without ../shared skips, as every test that needs them; a user's machine downloads them)."""
    cpu = [s for s in snippets(README.read_text(encoding="utf-8")) if s.kind == "cpu"]
    problems = [p for s in cpu for p in [run_problem(s, tmp_path)] if p]
    assert problems == [], "\n\n".join(problems)
    assert (tmp_path / "my_outputs.csv").is_file() and (tmp_path / "runs" / "try" / "curves.jsonl").is_file()


# ----------------------------------------------------------------------------------------------- the self-tests

BROKEN = """
```bash
mlft score my.csv --no-such-flag
```

<!-- snippet: gpu -->
```bash
accelerate launch --config_file configs/accelerate/nope.yaml -m mlft train recipes/multilingual_sft.yaml --chek
make demo-please
```

```python
rows = [1, 2]
print(len(rowz))
```

<!-- snippet: served -->
```python
client.chat.completions.create(model="m", messages=[
```

<!-- snippet: gpu-ish -->
```bash
mlft env
```
"""


@pytest.mark.slow
def test_a_broken_snippet_is_reported(tmp_path):
    found = snippets(BROKEN)
    assert [(s.lang, s.kind, s.line) for s in found] == [
        ("bash", "cpu", 2),
        ("bash", "gpu", 7),
        ("python", "cpu", 12),
        ("python", "served", 18),
        ("bash", "gpu-ish", 23),
    ]
    parsed = [p for s in found for p in parse_problems(s)]
    assert parsed[0] == "README.md:2 (bash, cpu): `mlft score my.csv --no-such-flag` does not parse"
    assert "configs/accelerate/nope.yaml: no such file" in parsed[1]
    assert "`mlft train recipes/multilingual_sft.yaml --chek` does not parse" in parsed[2]
    assert "make demo-please: no such target" in parsed[3]
    assert "README.md:18 (python, served): Python does not parse" in parsed[4]
    assert "unknown snippet kind 'gpu-ish'" in parsed[5] and len(parsed) == 6
    (tmp_path / "my.csv").write_text("id,model,completion,task,source,language\n")
    flag = run_problem(found[0], tmp_path, timeout=120)
    assert flag is not None and "exit 2" in flag and "--no-such-flag" in flag
    name = run_problem(found[2], tmp_path, timeout=60)
    assert name is not None and "NameError: name 'rowz' is not defined" in name
    fixed = Snippet("python", "cpu", "rows = [1, 2]\nprint(len(rows))\n", 12)
    assert parse_problems(fixed) == [] and run_problem(fixed, tmp_path, timeout=60) is None
