"""`mlft build`: the artefacts an inference-time intervention loads: language vectors (`steer`), the learned gate
(`gate`), the judge of answers a reward term asks (`judge`: a PMI threshold fitted, an LLM-as-judge checked). Each
member is a module of mlft/commands with `add_parser(sub, name)` and `run(args)`."""

from __future__ import annotations

from mlft.commands.group import add_group

# Order = order in `mlft build --help`; a new member is one line here (and its module).
MEMBERS = [
    "steer",
    "gate",
    "judge",
]


def add_parser(sub):
    return add_group(
        sub,
        "build",
        help="build what an intervention or a reward loads: steering vectors (steer), the learned gate (gate), "
        "a judge (judge)",
        description="Build the files an inference-time intervention loads (suites' `interventions:`), each "
        "from the frozen model and parallel text, never LCB test prompts, with a provenance JSON beside it.",
        members=MEMBERS,
    )
