"""`mlft build judge calibrate | check`: a judge of "does the reply answer?" on a labelled set, the result written
with the model it was fitted on (mlft.generation.judge_calibration).

  calibrate --judge pmi [--model M]     fit the PMI relevance judge's threshold under M (default: the embedded
                                        model); the file is what an answer term's `threshold` takes for
                                        `judge_model: M` (and is refused for any other model)
  check --backend B --model M [...]     an LLM-as-judge (mlft.generation.llm_judge) through backend B (hf, vllm,
                                        openai: a local `vllm serve` or any OpenAI-compatible server): its agreement
                                        with the labels, verdicts cached (--cache, resumable)
Everything is checked before any model loads: the labelled set, the backend, the model, the cache path.
"""

from __future__ import annotations

from pathlib import Path

from mlft.errors import ConfigError

# the shipped labelled set: 220 hand-labelled replies in 10 languages (package data, so a pip-installed mlft has it)
LABELLED = Path(__file__).resolve().parents[1] / "resources" / "labelled.jsonl"


def add_parser(sub, name: str = "judge", **kw):
    """`mlft build judge`: calibrate or check a judge of answers."""
    p = sub.add_parser(
        name,
        **kw,
        help="calibrate / check a judge of whether a reply answers (PMI threshold, LLM-as-judge)",
        description=__doc__.split("\n\n")[0],
    )
    s = p.add_subparsers(dest="judge_command", metavar="ACTION", required=True)
    for name, text in (
        ("calibrate", "fit the PMI judge's threshold on a labelled set, written with the model it was fitted on"),
        ("check", "an LLM-as-judge's agreement with a labelled set, through any backend"),
    ):
        a = s.add_parser(name, help=text, description=text)
        a.add_argument("--labelled", default=str(LABELLED), help="labelled set (JSONL: prompt, reply, language, label)")
        a.add_argument("--model", default=None, help="judge model (default: the embedded SmolLM2-135M-Instruct)")
        a.add_argument("--out", required=True, help="result file to write (JSON)")
        a.add_argument("--limit", type=int, default=None, help="the first N rows only")
    c = s.choices["calibrate"]
    c.add_argument("--judge", choices=("pmi",), default="pmi", help="the judge whose threshold is fitted")
    k = s.choices["check"]
    k.add_argument("--backend", default="hf", help="generation backend: hf | vllm | openai")
    k.add_argument("--base-url", default=None, help="openai: the server's endpoint, e.g. http://127.0.0.1:8000/v1")
    k.add_argument("--api-key", default=None, help="openai: API key (a local server accepts any, e.g. EMPTY)")
    k.add_argument("--cache", default=None, help="verdict cache (JSONL; resumed where a run stopped)")
    k.add_argument(
        "--concurrency", type=int, default=None, help="openai: requests in flight at most (default: the backend's)"
    )
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    from mlft.generation.judge_calibration import check_llm, fit_pmi, load_labelled, write_result

    if args.limit is not None and args.limit < 2:
        raise ConfigError(f"--limit: at least 2 rows, got {args.limit}")
    rows = load_labelled(args.labelled)[: args.limit]
    out = Path(args.out)
    if out.is_dir() or not out.parent.is_dir():
        raise ConfigError(f"--out {out}: give a file in an existing folder")
    if args.judge_command == "calibrate":
        result = fit_pmi(args.model, rows)
    else:
        from mlft.generation.llm_judge import LlmJudge, check_judge_config

        check_judge_config(args.backend, args.model, args.cache, "mlft build judge check")
        import dataclasses

        from mlft.generation.backends import backend_class

        # the flags given, as the backend's own options (a backend without such an option refuses it, naming it)
        options = {"base_url": args.base_url, "api_key": args.api_key, "concurrency": args.concurrency}
        options = {k: v for k, v in options.items() if v is not None}
        if "logprobs" in {f.name for f in dataclasses.fields(backend_class(args.backend).Options)}:
            options["logprobs"] = False  # a verdict needs the words only
        judge = LlmJudge(args.backend, args.model, options, args.cache)
        try:
            result = check_llm(judge, rows)
        finally:
            judge.close()
    path = write_result(result, out, args.labelled)
    print(
        f"{path}: {result['judge']} judge {result['model']}: agreement {result['agreement']:.1%} on {result['n']} rows "
        f"(always 'not an answer': {result['always_not_answer']:.1%}); answers called answers "
        f"{result['answers_called_answers']:.1%}, non-answers {result['non_answers_called_answers']:.1%}"
        + (f"; threshold {result['threshold']} nats" if "threshold" in result else "")
    )
    return 0
