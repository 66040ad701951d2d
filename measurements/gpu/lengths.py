"""Row lengths for the GPU train benchmark: training rows of realistic token lengths built from real text.

Two length distributions (token counts of a whole chat-templated row, SmolLM2 tokenizer):

lcb        empirical: each row = one LCB prompt's length + one released reply's length (drawn independently), from
           `lcb_lengths.json`, written at prepare time (measurements/gpu/prepare.sh -> .gpu_assets/lcb_lengths.json)
           from
           the real LCB prompts (mlft.benchmarks.lcb.data.load_prompts) and the paper's released outputs
           (mlft.completions.read_completions on $MLFT_LCB_DATA/outputs/*.csv), so nothing is downloaded on the GPU.
ultrachat  parametric: lognormal, median 1,000 tokens, sigma 0.9 (so p90 ~ 3,170, p99 ~ 8,100), clipped to
           [64, 8192]; 1 to 4 turns (one per ~700 tokens). SOURCE: these are the issue's stated targets for an
           UltraChat-like multi-turn SFT set ("median ~1,000 tokens, long tail to 8k"), NOT a fit to the dataset:
           nothing is downloaded here. Replace ULTRACHAT with a fit when the real length histogram is at hand.

Rows are built from mlft's seed text (real sentences, cycled) to EXACTLY the drawn token length of the templated
conversation (build_row adjusts the last assistant message token by token and checks the result).
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

ULTRACHAT = {
    "median": 1000.0,
    "sigma": 0.9,
    "min": 64,
    "max": 8192,
    "tokens_per_turn": 700,
    "max_turns": 4,
    "user_share": 0.3,
}
KINDS = ("lcb", "ultrachat")


def lognormal_quantile(q: float, median: float, sigma: float) -> float:
    """Quantile of the (unclipped) lognormal: median * exp(sigma * z_q)."""
    from statistics import NormalDist

    return median * math.exp(sigma * NormalDist().inv_cdf(q))


def sample_lengths(kind: str, n: int, seed: int = 0, lengths_file: str | Path | None = None) -> list[int]:
    """`n` row lengths (tokens of the templated row), reproducible for a seed."""
    rng = random.Random(seed)
    if kind == "ultrachat":
        u = ULTRACHAT
        mu = math.log(u["median"])
        return [min(u["max"], max(u["min"], round(rng.lognormvariate(mu, u["sigma"])))) for _ in range(n)]
    if kind == "lcb":
        if lengths_file is None or not Path(lengths_file).is_file():
            raise FileNotFoundError(f"lcb row lengths: {lengths_file} not found (run measurements/gpu/prepare.sh)")
        data = json.loads(Path(lengths_file).read_text(encoding="utf-8"))
        prompts, replies = data["prompt_tokens"], data["reply_tokens"]
        if not prompts or not replies:
            raise ValueError(f"{lengths_file}: empty prompt_tokens or reply_tokens")
        overhead = data.get("template_tokens", 0)
        return [rng.choice(prompts) + rng.choice(replies) + overhead for _ in range(n)]
    raise ValueError(f"unknown length distribution {kind!r} (choose from {', '.join(KINDS)})")


def lcb_lengths(tokenizer, outputs_dir: str | Path) -> dict:
    """Token lengths of every LCB prompt (its text, no template) and every released reply (all models' CSVs), plus
    the chat template's own tokens for one exchange."""
    from mlft.benchmarks.lcb.data import load_prompts
    from mlft.completions import read_completions

    prompts = load_prompts(["monolingual", "crosslingual"])
    p_len = [len(tokenizer(p.prompt, add_special_tokens=False)["input_ids"]) for p in prompts]
    files = sorted(Path(outputs_dir).glob("*.csv"))
    if not files:
        raise FileNotFoundError(f"no released outputs (*.csv) in {outputs_dir}")
    r_len = [
        len(tokenizer(c.completion, add_special_tokens=False)["input_ids"])
        for f in files
        for c in read_completions(f)
        if c.completion
    ]
    empty = templated_length(tokenizer, [{"role": "user", "content": ""}, {"role": "assistant", "content": ""}])
    return {
        "prompt_tokens": p_len,
        "reply_tokens": r_len,
        "template_tokens": empty,
        "source": {"prompts": len(p_len), "outputs": [f.name for f in files], "replies": len(r_len)},
    }


def templated_length(tokenizer, messages: list[dict]) -> int:
    ids = tokenizer.apply_chat_template(messages, tokenize=True)
    if isinstance(ids, dict) or hasattr(ids, "keys"):  # transformers 5 may return a BatchEncoding
        ids = ids["input_ids"]
    return len(ids)


def seed_token_stream(tokenizer) -> list[int]:
    """Token ids of mlft's seed texts (instructions and responses, all languages), in order: the text of the rows."""
    from mlft.data.seed import english_items, parallel_items

    texts = []
    for it in english_items():
        texts += [it.get("instruction", ""), it.get("response", "")]
    for it in parallel_items():
        for lang in sorted(it["langs"]):
            texts += [it["langs"][lang].get("instruction", ""), it["langs"][lang].get("response", "")]
    ids: list[int] = []
    for t in texts:
        if t:
            ids += tokenizer(t + "\n", add_special_tokens=False)["input_ids"]
    return ids


def build_row(
    tokenizer, target: int, stream: list[int], offset: int, turns: int = 1, user_share: float = 0.3, row_id: str = "r"
) -> dict:
    """A chat row of exactly `target` tokens (chat template applied), its text cut from `stream` at `offset`."""
    msgs = [{"role": r, "content": "x"} for _ in range(turns) for r in ("user", "assistant")]
    overhead = templated_length(tokenizer, [{"role": m["role"], "content": ""} for m in msgs])
    if target < overhead + 2 * turns:
        raise ValueError(
            f"row {row_id}: {target} tokens is shorter than the template of {turns} turn(s) "
            f"({overhead} tokens + one token per message)"
        )
    body = target - overhead
    n = len(stream)
    pos = offset

    def take(k: int) -> str:
        nonlocal pos
        ids = [stream[(pos + i) % n] for i in range(max(1, k))]
        pos += len(ids)
        return tokenizer.decode(ids).strip() or "."

    per_turn = body // turns
    for t in range(turns):
        share = per_turn if t < turns - 1 else body - per_turn * (turns - 1)
        u = max(1, round(share * user_share))
        msgs[2 * t]["content"] = take(u)
        msgs[2 * t + 1]["content"] = take(share - u)
    # exact length: grow or shrink the last reply token by token (decode/re-encode can merge tokens at the seams)
    last = msgs[-1]
    ids = tokenizer(last["content"], add_special_tokens=False)["input_ids"]
    for _ in range(64):
        diff = target - templated_length(tokenizer, msgs)
        if diff == 0:
            return {"id": row_id, "messages": msgs, "tokens": target}
        if diff > 0:
            ids = ids + [stream[(pos + i) % n] for i in range(diff)]
            pos += diff
        else:
            ids = ids[:diff] if len(ids) > -diff else ids[:1]
        last["content"] = tokenizer.decode(ids)
        ids = tokenizer(last["content"], add_special_tokens=False)["input_ids"]
    raise RuntimeError(
        f"row {row_id}: could not reach exactly {target} tokens (at {templated_length(tokenizer, msgs)})"
    )


def build_rows(tokenizer, lengths: list[int], kind: str, seed: int = 0) -> list[dict]:
    """One row per length; `language: en` (the text is the seed stream's, mostly English)."""
    stream = seed_token_stream(tokenizer)
    rng = random.Random(seed)
    rows = []
    for i, target in enumerate(lengths):
        turns = 1
        if kind == "ultrachat":
            turns = max(1, min(ULTRACHAT["max_turns"], round(target / ULTRACHAT["tokens_per_turn"])))
        row = build_row(
            tokenizer,
            target,
            stream,
            rng.randrange(len(stream)),
            turns=turns,
            user_share=ULTRACHAT["user_share"] if kind == "ultrachat" else 0.5,
            row_id=f"{kind}-{i}",
        )
        row["language"] = "en"
        rows.append(row)
    return rows


def write_mix(rows: list[dict], folder: Path, total: int) -> Path:
    """rows.jsonl + a mix file (one `local` source) that `mlft train` reads like any other mix."""
    import yaml

    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "rows.jsonl", "w", encoding="utf-8") as fh:
        for r in rows:
            fh.write(
                json.dumps({"id": r["id"], "messages": r["messages"], "language": r["language"]}, ensure_ascii=False)
                + "\n"
            )
    # the rows are synthetic cuts of mlft's (already decontaminated) seed text: no LCB decontamination pass
    mix = {
        "kind": "sft",
        "seed": 0,
        "total": total,
        "decontaminate": {"enabled": False},
        "sources": [
            {
                "name": folder.name.replace("-", "_"),
                "type": "local",
                "path": "rows.jsonl",
                "format": "messages",
                "share": 1.0,
                "language": "en",
            }
        ],
    }
    path = folder / "mix.yaml"
    path.write_text(yaml.safe_dump(mix, sort_keys=False), encoding="utf-8")
    return path
