"""The `lcb` eval kind's configuration: the suite keys (`LcbOptions`, its `variants`), their validation before any
model loads, the runs they resolve to (one per variant: decoding, prompting, interventions), and what they select:
the prompts (`select_prompts`) and, for a suite with answers, the prompts' answer key (`answer_key`). Kept apart from
running and scoring (`mlft.evals.lcb`): `mlft generate` and the measurement scripts read a suite's runs and prompts
without the kind's generation and report code.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlft.benchmarks.answers import parse_answer
from mlft.benchmarks.lcb.data import SOURCES, load_prompt_file, load_prompts, sample_per_language, stratified_sample
from mlft.benchmarks.lcb.judge import check_judge
from mlft.benchmarks.lcb.traces import DEFAULT_MARKERS, parse_markers
from mlft.config import check_choice, from_dict
from mlft.constants import TASKS
from mlft.errors import ConfigError
from mlft.generation.decoding import Decoding
from mlft.generation.interventions import build_interventions
from mlft.generation.prompting import Prompting
from mlft.io.jsonl import read_jsonl
from mlft.languages import check_language, check_scorable
from mlft.paths import resolve_path


@dataclass
class Variant:
    name: str = field(metadata={"help": "row label in the report (e.g. 'T=0.3', '5-shot', '+script gate')"})
    decoding: dict = field(default_factory=dict, metadata={"help": "decoding keys overriding the suite's"})
    prompting: dict = field(default_factory=dict, metadata={"help": "prompting keys overriding the suite's"})
    interventions: list[dict] | None = field(
        default=None, metadata={"help": "interventions of this row (replacing the suite's list); null = the suite's"}
    )


@dataclass
class LcbOptions:
    tasks: list[str] = field(default_factory=lambda: list(TASKS), metadata={"help": "LCB tasks"})
    sources: list[str] | None = field(default=None, metadata={"help": "LCB sources (null = all)"})
    languages: list[str] | None = field(default=None, metadata={"help": "language codes (null = all 15)"})
    per_group: int | None = field(
        default=None,
        metadata={
            "help": "seeded stratified sample: at most this many prompts per (task, source, language); null = all"
        },
    )
    per_language: int | None = field(
        default=None,
        metadata={
            "help": "seeded sample of this many prompts per (task, language), spread over the sources that have the "
            "language (after per_group, if both are set); null = no such cap"
        },
    )
    seed: int = field(default=0, metadata={"help": "seed of the samples"})
    data: str | None = field(
        default=None, metadata={"help": "LCB test_sets.zip or folder (null: $MLFT_LCB_DATA, the cache, else download)"}
    )
    prompts: str | None = field(
        default=None,
        metadata={
            "help": "a prompt file of your own instead of LCB (JSONL/CSV: id, prompt, language[, task, source]); "
            "tasks / sources / languages / per_group still filter it"
        },
    )
    decoding: Decoding = field(default_factory=Decoding, metadata={"help": "decoding settings (paper defaults)"})
    prompting: Prompting = field(default_factory=Prompting, metadata={"help": "chat / qa / raw, few-shot"})
    interventions: list[dict] = field(
        default_factory=list,
        metadata={"help": "inference-time interventions [{name: ..., <options>}] (see mlft/generation/interventions)"},
    )
    variants: list[Variant] = field(
        default_factory=list,
        metadata={"help": "sweep rows: each overrides decoding/prompting keys or the interventions; empty = one run"},
    )
    samples: int = field(
        default=1,
        metadata={
            "help": "replies per prompt under sampled decoding (each drawn with its own key: prompt id + sample index; "
            "greedy or beam decoding gives one). Every metric pools a prompt's replies as the official formula "
            "pools replies; intervals and paired tests resample prompts (a prompt's replies together). 1 = the "
            "official protocol, bit for bit"
        },
    )
    batch_size: int = field(default=16, metadata={"help": "prompts per generate call (hf) / chunk (openai)"})
    token_stats: bool = field(
        default=False,
        metadata={"help": "record per-token entropy and nucleus size (hf) and report confusion points (paper Table 7)"},
    )
    fluency: str | None = field(
        default="generation",
        metadata={
            "help": "fluency proxy, the mean token NLL of each reply: 'generation' = the generated tokens under the "
            "generating model's own logits before any logits processor (free; hf backend), 'unmodified' = "
            "a second pass under the evaluated model without its interventions (hooks and transforms too), a "
            "model reference = a second pass under that fixed model (e.g. a training run's base), null = off"
        },
    )
    judge: str | None = field(
        default=None,
        metadata={
            "help": "NON-OFFICIAL second judge (py3langid or langdetect, mlft.benchmarks.lcb.judge): every reply is "
            "scored again "
            "with this LID labelling the same counted lines; its LPR is reported beside the official one "
            "(metric lpr@<judge>, a column of the variants table with paired tests); null = off"
        },
    )
    trace_markers: str | None = field(
        default=DEFAULT_MARKERS.spec(),
        metadata={
            "help": "reasoning traces, 'OPEN,CLOSE' (mlft.benchmarks.lcb.traces): a reply holding these markers is "
            "split; the official rows score its answer, `trace_<metric>` rows (with `<variant>/"
            "outcomes.trace.jsonl`) its trace, `trace_<outcome>` rows the share of each split outcome. Replies "
            "without a marker are scored whole, bit for bit; null or 'none' = no split"
        },
    )
    answers: bool = field(
        default=False,
        metadata={
            "help": "the task axis: also score whether each reply answers, against the prompt file's `answer` column "
            "(verifiable prompts, e.g. eval/arithmetic_prompts.jsonl: every result the reply states == answer, "
            "mlft.benchmarks.answers); metric `task` (share of replies answering, Wilson interval) per task and "
            "language, per-reply verdicts in <variant>/task.jsonl. Needs `prompts:` with an answer on every row"
        },
    )
    confidence: float = field(default=0.95, metadata={"help": "level of the intervals on every metric row"})
    resamples: int = field(default=2000, metadata={"help": "bootstrap resamples for the intervals (seeded)"})


@dataclass(frozen=True)
class Run:
    """One variant, resolved: what generate_completions needs."""

    name: str
    decoding: Decoding
    prompting: Prompting
    interventions: tuple[Any, ...]


def runs(o: LcbOptions, where: str = "suite") -> list[Run]:
    """One Run per variant; one 'default' run when there are no variants."""
    if not o.variants:
        return [
            Run(
                "default",
                o.decoding,
                o.prompting,
                tuple(build_interventions(o.interventions, f"{where}: interventions")),
            )
        ]
    out = []
    for i, v in enumerate(o.variants):
        w = f"{where}: variants[{i}]"
        dec = from_dict(Decoding, {**dataclasses.asdict(o.decoding), **v.decoding}, f"{w}.decoding")
        pro = from_dict(Prompting, {**dataclasses.asdict(o.prompting), **v.prompting}, f"{w}.prompting")
        ivs = build_interventions(o.interventions if v.interventions is None else v.interventions, f"{w}.interventions")
        out.append(Run(v.name, dec, pro, tuple(ivs)))
    return out


def validate(o: LcbOptions, where: str) -> None:
    for i, t in enumerate(o.tasks):
        check_choice(t, TASKS, "task", f"{where}: tasks[{i}]")
    for i, lang in enumerate(o.languages or []):
        (check_scorable if o.prompts else check_language)(lang, f"{where}: languages[{i}]")
    if o.prompts is not None:
        if not resolve_path(o.prompts).is_file():  # cwd, else the shipped eval/ files (e.g. eval/steer_dev_prompts)
            built = Path(o.prompts).parent.name == "mix"  # a prompts mix's prompt file (mlft.training.spread)
            raise ConfigError(
                f"{where}: prompts: file not found: {o.prompts}"
                + (
                    " (a prompts mix writes it: `mlft data mix MIX.yaml --out DIR` gives DIR/mix/prompts.jsonl)"
                    if built
                    else ""
                )
            )
    else:
        valid_sources = {s for t in o.tasks for pair in SOURCES[t].items() for s in pair}
        for i, s in enumerate(o.sources or []):
            check_choice(s, valid_sources, "source", f"{where}: sources[{i}]")
    for key in ("per_group", "per_language"):
        if getattr(o, key) is not None and getattr(o, key) < 1:
            raise ConfigError(f"{where}: {key}: must be >= 1 or null, got {getattr(o, key)}")
    if o.batch_size < 1:
        raise ConfigError(f"{where}: batch_size: must be >= 1, got {o.batch_size}")
    if not isinstance(o.samples, int) or isinstance(o.samples, bool) or o.samples < 1:
        raise ConfigError(f"{where}: samples: must be a whole number >= 1, got {o.samples!r}")
    resolved = runs(o, where)  # validates every variant's decoding / prompting / interventions
    names = [r.name for r in resolved]
    if len(set(names)) != len(names):
        raise ConfigError(f"{where}: variants: names must be unique, got {names}")
    if o.token_stats and any(r.decoding.num_beams > 1 for r in resolved):
        raise ConfigError(f"{where}: token_stats needs num_beams=1 in every variant")
    if o.judge is not None:
        check_judge(o.judge, f"{where}: judge")
    parse_markers(o.trace_markers, f"{where}: trace_markers")
    if o.answers:
        answer_key(o, where)
        distractor_key(o, where)
    if not 0 < o.confidence < 1 or o.resamples < 100:
        raise ConfigError(f"{where}: confidence must be in (0, 1) and resamples >= 100")


def select_prompts(o: LcbOptions):
    if o.prompts is not None:
        prompts = [
            p
            for p in load_prompt_file(resolve_path(o.prompts))
            if p.task in o.tasks
            and (not o.sources or p.source in o.sources)
            and (not o.languages or p.language in o.languages)
        ]
        if not prompts:
            raise ConfigError(
                f"{o.prompts}: no prompts left after the suite's filters (tasks {o.tasks}, sources "
                f"{o.sources}, languages {o.languages}); override them, e.g. sources=null languages=null"
            )
    else:
        prompts = load_prompts(o.tasks, o.sources, o.languages, path=o.data)
    if o.per_group:
        prompts = stratified_sample(prompts, o.per_group, o.seed)
    if o.per_language:
        prompts = sample_per_language(prompts, o.per_language, o.seed)
    return prompts


def answer_key(o: LcbOptions, where: str) -> dict[str, float]:
    """Prompt id -> its reference answer, from the suite's prompt file; a suite whose prompts have no reference
    is refused here, before any model loads (LCB's own prompts have none)."""
    if o.prompts is None:
        raise ConfigError(
            f"{where}: answers: LCB's prompts have no reference answers; give `prompts:` a file whose rows carry an "
            "`answer` (e.g. eval/arithmetic_prompts.jsonl, `python -m mlft.data.arithmetic`), or set answers: false"
        )
    path = resolve_path(o.prompts)
    key: dict[str, float] = {}
    for n, rec in enumerate(read_jsonl(path), 1):
        try:
            key[str(rec["id"])] = parse_answer(rec["answer"])
        except KeyError:
            raise ConfigError(
                f"{where}: answers: {o.prompts}: row {n} ({rec.get('id')!r}) has no `answer`; every prompt needs "
                "a reference answer for the task metric"
            ) from None
        except ValueError as exc:
            raise ConfigError(f"{where}: answers: {o.prompts}: row {n} ({rec.get('id')!r}): answer {exc}") from None
    return key


def distractor_key(o: LcbOptions, where: str) -> dict[str, tuple[float, ...]]:
    """Prompt id -> the numbers a reply must not state, for the prompt file's rows that carry `distractors`
    (extractive prompts, mlft.data.extraction: checked by mlft.benchmarks.extraction instead of the last number)."""
    if o.prompts is None:
        return {}
    key: dict[str, tuple[float, ...]] = {}
    for n, rec in enumerate(read_jsonl(resolve_path(o.prompts)), 1):
        if rec.get("distractors") is None:
            continue
        try:
            key[str(rec["id"])] = tuple(parse_answer(d) for d in rec["distractors"])
        except (TypeError, ValueError) as exc:
            raise ConfigError(
                f"{where}: answers: {o.prompts}: row {n} ({rec.get('id')!r}): distractors must be a list of numbers "
                f"({exc})"
            ) from None
    return key
