"""A second language-ID judge beside the official LPR (NON-OFFICIAL): the same replies, the same counted lines
(LCB's rule: >= 5 tokens in the expected language's tokenisation, which no LID decides), the same threshold
(score > 0.3) and the official aggregation, with each counted line labelled by another model family
(`mlft.langid.OTHER_LIDS`: py3langid or langdetect) instead of fastText. A mitigation tuned against one LID
(line resampling with a verifier, steering towards fastText's notion of a language) can overstate its gain; a
gain that the second judge sees too is not an artefact of the first. Used by `mlft score --judge` and by the
`judge:` key of an lcb eval suite (a `lpr@<judge>` metric row and a column beside the official one)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from mlft.benchmarks.lcb.scoring import score_completions
from mlft.completions import Completion
from mlft.errors import ConfigError
from mlft.langid import OTHER_LIDS, check_lid_spec

JUDGES = OTHER_LIDS


def check_judge(judge: str, where: str) -> str:
    """The judge's name, or a ConfigError naming the valid judges (and the package to install)."""
    if judge not in JUDGES:
        raise ConfigError(
            f"{where}: unknown judge {judge!r}; valid: {', '.join(JUDGES)} (the official scorer's "
            f"fastText model is the first judge)"
        )
    check_lid_spec(judge, where)
    return judge


def metric_name(judge: str) -> str:
    """The long-format metric name of the judged LPR (e.g. `lpr@langdetect`)."""
    return f"lpr@{judge}"


def judge_of(metric: str) -> str | None:
    """The judge a metric name is judged by (`lpr@langdetect` -> langdetect); None for an official metric."""
    head, at, judge = metric.partition("@")
    return judge if at and head == "lpr" and judge else None


def judge_report(completions: Sequence[Completion], judge: str, options=None, *, words=None, workers=None):
    """`mlft.benchmarks.lcb.scoring.score_completions` with `judge` labelling the lines (a ScoreReport,
    NON-OFFICIAL)."""
    check_judge(judge, "judge")
    return score_completions(list(completions), options, lid=judge, words=words, workers=workers)


def beside_rows(completions: Sequence[Completion], official, judged, judge: str) -> list[dict]:
    """Per (task, model, source, language) row of the official report: the official LPR, the judged LPR, their
    difference and how many replies the two judges disagree on (a line error for one, not for the other)."""
    if len(official.replies) != len(completions) or len(judged.replies) != len(completions):
        raise ValueError("beside_rows: both reports must score the same completions")
    disagree: dict[tuple, int] = defaultdict(int)
    counted: dict[tuple, int] = defaultdict(int)
    for c, a, b in zip(completions, official.replies, judged.replies):
        if a.counted != b.counted:  # the counted lines do not depend on the LID
            raise ValueError(f"{c.id}: counted by one judge only")
        if not a.counted:
            continue
        for key in (
            (c.task, c.model, c.source, c.language),
            (c.task, c.model, "all", c.language),
            (c.task, c.model, c.source, "all"),
            (c.task, c.model, "all", "all"),
        ):
            counted[key] += 1
            disagree[key] += a.line_error != b.line_error
    by_key = {(r["task"], r["model"], r["source"], r["language"]): r for r in judged.rows}
    out = []
    for r in official.rows:
        key = (r["task"], r["model"], r["source"], r["language"])
        j = by_key[key]["lpr"]
        out.append(
            {
                "task": r["task"],
                "model": r["model"],
                "source": r["source"],
                "language": r["language"],
                "lpr": r["lpr"],
                metric_name(judge): j,
                "difference": None if r["lpr"] is None or j is None else j - r["lpr"],
                "counted": counted.get(key, 0),
                "disagree": disagree.get(key, 0),
            }
        )
    return out
