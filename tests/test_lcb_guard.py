"""The degeneracy detector (15 languages, lists, code, real replies), guard rows and flags on a file of degenerate
replies that LPR alone scores 100 %, and the fluency proxy on the embedded model."""

import json
import random

import numpy as np
import pytest

from mlft.benchmarks.lcb.guard import degeneracy_reason, is_degenerate, tandem_cover
from mlft.benchmarks.lcb.guard_report import guard_flags, guard_rows
from mlft.completions import read_completions
from mlft.errors import ConfigError

NORMAL = {
    "ar": "الطاقة المتجددة مهمة جدا لمستقبل كوكبنا. فهي تقلل من انبعاثات الكربون وتوفر فرص عمل جديدة في كثير من الدول.",
    "de": "Erneuerbare Energien sind für die Zukunft unseres Planeten sehr wichtig. Sie senken den CO2-Ausstoß.",
    "en": "Renewable energy matters for the future of our planet. It cuts carbon emissions and creates new jobs.",
    "es": "La energía renovable es muy importante para el futuro del planeta. Reduce las emisiones de carbono.",
    "fr": "Les énergies renouvelables sont essentielles pour l'avenir de notre planète. Elles réduisent les émissions.",
    "hi": "नवीकरणीय ऊर्जा हमारे ग्रह के भविष्य के लिए बहुत महत्वपूर्ण है। यह कार्बन उत्सर्जन को कम करती है।",
    "id": "Energi terbarukan sangat penting bagi masa depan planet kita. Energi ini mengurangi emisi karbon.",
    "it": "Le energie rinnovabili sono molto importanti per il futuro del nostro pianeta. Riducono le emissioni.",
    "ja": "再生可能エネルギーは地球の未来にとってとても重要です。炭素の排出を減らし、多くの国で新しい雇用を生み出します。",  # noqa: E501
    "ko": "재생 에너지는 우리 지구의 미래에 매우 중요합니다. 탄소 배출을 줄이고 많은 나라에서 새로운 일자리를 만듭니다.",  # noqa: E501
    "pt": "A energia renovável é muito importante para o futuro do nosso planeta. Ela reduz as emissões de carbono.",
    "ru": "Возобновляемая энергия очень важна для будущего нашей планеты. Она сокращает выбросы углерода.",
    "tr": "Yenilenebilir enerji gezegenimizin geleceği için çok önemlidir. Karbon salımını azaltır.",
    "vi": "Năng lượng tái tạo rất quan trọng đối với tương lai của hành tinh chúng ta. Nó giảm khí thải carbon.",
    "zh": "可再生能源对我们星球的未来非常重要。它可以减少碳排放，并在许多国家创造新的就业机会。哈哈，这是真的。",
}
OTHER_NORMAL = [
    "Here are five ideas:\n1. Plant a tree\n2. Cycle to work\n3. Eat less meat\n4. Turn off the lights\n5. Reuse bags",
    "- Yes\n- No\n- Maybe\n- Later",
    "```python\ndef add(a, b):\n    return a + b\n\nfor i in range(10):\n    print(add(i, i))\n```",
    "x = 0\ny = 0\nz = 0\nprint(x + y + z)",
    "| Name | Age |\n|------|-----|\n| Ana  | 31  |\n| Ben  | 27  |",
    "================\nSummary\n================\nThe meeting moved to Tuesday because the room was booked.",
    "Yes.",
    "42",
    "OK",
    "No, no, no.",
    "1,000,000",
    "ありがとうございます。とても嬉しいです。またよろしくお願いします。",
    "Very, very, very good question! Let me explain how photosynthesis works and why it matters.",
    "Шаг 1: откройте файл.\nШаг 2: сохраните файл.\nШаг 3: закройте файл.",
    # a refrain (lines repeated, not back to back), a title repeated in the text, a table repeating a cell
    "고양이가 쥐를 쫓아\n개가 짖어 울어\n쥐가 피해 도망가\n개가 쫓아가며 짖어\n고양이가 쥐를 잡아\n개가 짖어 울어\n"
    "쥐가 피해 도망가\n개가 쫓아가며 짖어\n고",
    "स्वस्थ खान-पान का महत्व\n\nस्वस्थ खान-पान का महत्व आजकल किसी को भी नहीं छूकता है। एक स्वस्थ आहार हमारे शरीर क",
    '展览标题\t主题\t策展人\n"中国明清绘画"\t中国明清绘画\t李明\n"古埃及文明"\t古埃及文明\t王小红\n"古希腊雕塑"\t古希腊雕塑\t张伟',
]
DEGENERATE = {
    "": "empty",
    "  \n\t ": "empty",
    '""""""': "no-words",
    ", . , . , . , . , .": "no-words",
    "```\n\n```\n\n```": "no-words",
    "itititititititit": "repeated-chars",
    "ababababab": "repeated-chars",
    "!!!!!!!!!!!!!!!!!!!!! ok": "repeated-chars",
    "哈哈哈哈哈哈哈哈哈哈": "repeated-chars",
    "1. 1. 1. 1. 1. 1. 1. 1.": "repeated-chars",
    "\ufffd" * 40: "no-words",
    "Here is a story in Korean:\n\n" + "\ufffd" * 80: "repeated-chars",
    "the the the the the the the the": "repeated-chars",
    "AI\n\n\n\nAI\n\n\n\nAI\n\n\n\nAI\n\n\n\nAI": "repeated-chars",
    "校园贷有什么坏处？\n" * 6: "repeated-chars",
    "The cat sat. The cat sat! The cat sat? The cat sat, the cat": "repeated-tokens",
    ("我们应该保护环境，因为环境很重要。" + "我们应该保护环境，因为环境很重要！") * 2: "repeated-tokens",
    "क्या होता है जब माँ का घर नहीं आता? " * 4: "repeated-tokens",
    "Gini index wa kakutoku no kakute no sai o kakute iru kakutoku no kakute no sai o kakute iru kakutoku no kakute "
    "no sai o kakute iru kakutoku no": "repeated-tokens",
    "I'm not sure what the answer is, but I think the question is about your favorite sport and hobby.\n"
    "I'm not sure what the answer is, but I think the question is about your favorite sport and hobby.\nI'm": "repeated-lines",  # noqa: E501
    "Write a letter to the editor of your local newspaper about recycling.\nWrite a letter to your local government.\n"
    "Write a letter to the editor of your local newspaper about recycling.\nWrite a letter to your local government.": "repeated-lines",  # noqa: E501
    "Organic food\n1.\nOrganic food\n2.\nOrganic food\n3.\nOrganic food": "repeated-lines",
}


SALAD_PAIRS = [
    "Le le la la de de et et un un une une des des",
    "a a b b c c",
    "Der der die die das das und und ist ist",
    "the the cat cat sat sat on on the the mat mat",
    "学学生生老老师师",
]
STILL_NORMAL = [
    "Anak-anak bermain di taman bersama orang-orang tua mereka setiap hari.",
    "No no, yes yes.",
    "我们常常去看望爷爷，他每天都很高兴，说说笑笑。",
    "Very very good, thank you so much for the help.",
]


def test_real_word_salad_of_pairs_is_degenerate():
    """`a a b b c c` salad (each word doubled): real words, so lexical validity passes it, and no unit repeats
    three times in a row, so the loop rules missed it."""
    for text in SALAD_PAIRS:
        assert degeneracy_reason(text) == "repeated-pairs", text
    for text in STILL_NORMAL:
        assert degeneracy_reason(text) is None, text


def test_tandem_cover():
    seq = np.array([5, 1, 2, 1, 2, 1, 2, 9])
    assert tandem_cover(seq, 4, 3, 6).tolist() == [False] + [True] * 6 + [False]
    assert not tandem_cover(seq, 4, 4, 6).any()  # only 3 copies of (1, 2)
    assert not tandem_cover(np.array([1, 2, 3]), 4, 3, 2).any()


def test_degenerate_replies_are_flagged():
    for text, reason in DEGENERATE.items():
        assert degeneracy_reason(text) == reason, text


def test_normal_replies_are_not_flagged():
    for lang, text in NORMAL.items():
        assert degeneracy_reason(text) is None, lang
    for text in OTHER_NORMAL:
        assert degeneracy_reason(text) is None, text


def test_real_replies(shared):
    """The first 8 replies per (task, language) of three strong models: none flagged (none of their 19,758
    replies is); a base model that echoes and loops: >= 15 % of its first 600 (26 % of all)."""
    out = shared / "lcb" / "outputs"
    for model in ("gpt-4-turbo", "command-r-plus", "mistral-large"):
        seen: dict = {}
        for c in read_completions(out / f"{model}.csv"):
            key = (c.task, c.language)
            if seen.get(key, 0) < 8:
                seen[key] = seen.get(key, 0) + 1
                assert not is_degenerate(c.completion), (model, c.id, c.completion)
        assert len(seen) == 29  # crosslingual has no English target
    base = read_completions(out / "command-r-base.csv")[:600]
    assert sum(is_degenerate(c.completion) for c in base) >= 90


@pytest.fixture(scope="module")
def degenerate_file(shared, tmp_path_factory):
    """A base run (real gpt-4-turbo replies) and a run of degenerate replies for the same 90 prompts, both
    scored by the real scorer (bundled fastText model)."""
    from mlft.benchmarks.lcb.metrics import ScoreOptions
    from mlft.benchmarks.lcb.scoring import analyze_all, load_resources, outcomes_from, score_completions

    # none has a line of >= 5 tokens in any of the five languages (jieba would count "ok ok ok", with its spaces)
    junk = ["", "itititititititit", '""""""', "哈哈哈哈", "lalalalalala", "\n\n", "..........", "ababababab"]
    base, seen = [], {}
    for c in read_completions(shared / "lcb" / "outputs" / "gpt-4-turbo.csv"):
        if c.task == "monolingual" and c.language in ("ar", "en", "fr", "ja", "zh") and seen.get(c.language, 0) < 18:
            seen[c.language] = seen.get(c.language, 0) + 1
            base.append(c)
    path = tmp_path_factory.mktemp("guard") / "degenerate.jsonl"
    with open(path, "w", encoding="utf-8") as fh:
        for i, c in enumerate(base):
            fh.write(
                json.dumps(
                    {
                        "id": c.id,
                        "task": c.task,
                        "source": c.source,
                        "language": c.language,
                        "model": "junk",
                        "completion": junk[i % len(junk)],
                    },
                    ensure_ascii=False,
                )
                + "\n"
            )
    run = read_completions(path)
    lid, words = load_resources("ftz", shared / "lcb" / "words")
    scored = {}
    for name, comps in (("base", base), ("run", run)):
        results = analyze_all([(c.completion, c.language) for c in comps], lid, words, ScoreOptions(), workers=1)
        scored[name] = (
            outcomes_from(comps, results),
            score_completions(comps, lid=lid, words=shared / "lcb" / "words", workers=1),
        )
    return scored


def test_guard_flags_degenerate_file_that_lpr_scores_100(degenerate_file):
    run, report = degenerate_file["run"]
    base, base_report = degenerate_file["base"]
    assert all(r["lpr"] == 1.0 for r in report.rows)  # LPR alone: a perfect score
    assert report.headline("monolingual", "junk")["lpr"] == 1.0
    assert base_report.headline("monolingual", "gpt-4-turbo")["lpr"] < 1.0
    rows = {r["language"]: r for r in guard_rows(run, n=2000)}
    assert rows["all"]["coverage"] == 0.0 and rows["all"]["degeneracy"] == 1.0 and rows["all"]["n"] == 90
    assert rows["all"]["lpr"] == 1.0
    # validity: only 哈哈哈哈 ("haha", a word in zh and ja) is made of words
    assert rows["all"]["validity"] < 0.2 and rows["all"]["skipped"] == 1.0 and rows["all"]["unknown"] is None
    flags = guard_flags(run, base, n=2000)
    paired = {(f.language, f.metric) for f in flags if f.paired}
    assert {("all", "coverage"), ("all", "degeneracy"), ("all", "validity")} <= paired
    assert {lang for lang, m in paired if m == "coverage"} == {"all", "ar", "en", "fr", "ja", "zh"}
    top = next(f for f in flags if f.paired and f.language == "all" and f.metric == "coverage")
    assert top.diff < -0.9 and top.ci_high < 0 and top.p_adjusted < 0.05 and "vs base" in top.reason
    # no base: absolute limits still flag it
    alone = {(f.language, f.metric) for f in guard_flags(run, n=2000)}
    assert {("all", "coverage"), ("all", "degeneracy"), ("all", "validity")} <= alone
    # different prompts: unpaired comparison
    unpaired = guard_flags(run, base[:60], n=2000, min_coverage=None, max_degeneracy=None)
    assert unpaired and not any(f.paired for f in unpaired)
    with pytest.raises(ConfigError, match="cannot show significance over 18 Holm-adjusted tests; use n >= 720"):
        guard_flags(run, base, n=200)


def test_guard_quiet_on_a_good_run(degenerate_file):
    base, _ = degenerate_file["base"]
    assert guard_flags(base, base, n=2000) == []
    rows = guard_rows(base, n=2000)
    assert all(r["coverage_ci_low"] <= r["coverage"] <= r["coverage_ci_high"] for r in rows)
    assert {r["language"] for r in rows} == {"all", "ar", "en", "fr", "ja", "zh"}
    assert all(r["validity"] >= 0.9 for r in rows)  # real replies: their words are words of the language
    assert 0 <= rows[0]["unknown"] < 0.05 and rows[0]["lines"] > 0


def test_fluency_proxy(embedded_model):
    from mlft.benchmarks.lcb.fluency import reply_nll

    model, tok = embedded_model
    msgs = [{"role": "user", "content": "What is the capital of France? Answer in one sentence."}]
    good = "The capital of France is Paris, which is also its largest city."
    words = good.split()
    random.Random(0).shuffle(words)
    prompts = [msgs, msgs, msgs, "Question: What is the capital of France?\nAnswer:", msgs, None, msgs, msgs]
    replies = [
        good,
        "itititititititit",
        " ".join(words),
        " The capital of France is Paris.",
        "",
        "Hello world, this is a test.",
        "   ",
        "Paris.",
    ]
    one = [reply_nll(model, tok, [p], [r])[0] for p, r in zip(prompts, replies)]
    assert one[4] is None and one[6] is None
    assert one[0] < 2.0 and one[1] > one[0] + 3 and one[2] > one[0] + 3
    for side in ("right", "left"):
        batched = reply_nll(model, tok, prompts, replies, batch_size=3, padding_side=side)
        assert [b is None for b in batched] == [o is None for o in one]
        assert np.allclose([b for b in batched if b is not None], [o for o in one if o is not None], atol=1e-4)
    assert not model.training


def _mixed_judge_inputs():
    """Several replies per context, of different lengths: two chat prompts, a raw-text context, no context, an
    empty reply."""
    flowers = [{"role": "user", "content": "How can I keep cut flowers fresh for longer?"}]
    sleep = [{"role": "user", "content": "What can I do to sleep better at night?"}]
    raw = "Question: What is the capital of France?\nAnswer:"
    return [flowers, sleep, flowers, raw, flowers, sleep, raw, None, flowers], [
        "Change the vase water every day and trim the stems at an angle.",
        "Keep a regular schedule.",
        "Water.",
        " Paris, which is also the largest city of France and its seat of government.",
        "",
        "Avoid caffeine in the evening, keep the bedroom dark and cool, and put the phone away an hour before bed.",
        " Paris.",
        "Hello world, this is a test.",
        "Keep them away from fruit and direct sunlight; a spoon of sugar in the water feeds them.",
    ]


def test_fluency_shared_contexts_give_the_plain_numbers(embedded_model, monkeypatch):
    """Each context run once, its cache reused by its replies (batches mixing contexts, a context's replies split
    across batches), gives each reply the plain path's NLL; the plain path is what a model without a cache gets."""
    import torch

    from mlft.benchmarks.lcb import fluency

    model, tok = embedded_model
    prompts, replies = _mixed_judge_inputs()
    runs = []
    real = fluency._cached_batch_nll
    monkeypatch.setattr(fluency, "_cached_batch_nll", lambda *a, **k: runs.append(len(a[2])) or real(*a, **k))
    shared = fluency.reply_nll(model, tok, prompts, replies, batch_size=3)
    assert sum(runs) == 8 and len(runs) == 3  # every non-empty reply went the shared way
    with monkeypatch.context() as mp:
        mp.setattr(fluency, "_cache_arg", lambda m: None)
        plain = fluency.reply_nll(model, tok, prompts, replies, batch_size=3, padding_side="left")
    assert shared[4] is None and plain[4] is None
    assert max(abs(a - b) for a, b in zip(shared, plain) if a is not None) < 1e-4

    class NoCache(torch.nn.Module):  # a forward that takes no cache: the plain path
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, position_ids, logits_to_keep=0):
            return self.inner(
                input_ids=input_ids,
                attention_mask=attention_mask,
                position_ids=position_ids,
                logits_to_keep=logits_to_keep,
            )

    runs.clear()
    fallback = fluency.reply_nll(NoCache(model).eval(), tok, prompts, replies, batch_size=3)
    assert runs == [] and np.allclose([f for f in fallback if f is not None], [p for p in plain if p is not None])
    assert not model.training


def test_fluency_a_reply_under_another_contexts_cache_scores_otherwise(embedded_model, monkeypatch):
    """The planted fault: a reply run on the cached keys and values of the wrong context is not its plain NLL."""
    import torch

    from mlft.benchmarks.lcb import fluency

    model, tok = embedded_model
    prompts, replies = _mixed_judge_inputs()
    arg = fluency._cache_arg(model)
    with monkeypatch.context() as mp:
        mp.setattr(fluency, "_cache_arg", lambda m: None)
        plain = fluency.reply_nll(model, tok, [prompts[0]], [replies[0]])[0]
    contexts = [fluency._context_ids(tok, prompts[0]), fluency._context_ids(tok, prompts[3])]
    reply = tok(replies[0], add_special_tokens=False)["input_ids"]
    pad = tok.pad_token_id
    with torch.inference_mode():
        held = fluency._contexts(model, contexts, pad, 2, "cpu", True, arg)
        right, wrong = fluency._cached_batch_nll(model, held, [(0, reply), (1, reply)], pad, "cpu", arg)
    assert abs(right - plain) < 1e-4
    assert abs(wrong - plain) > 0.1, (wrong, plain)


def test_the_guard_of_several_models_is_the_same_in_forked_workers(shared, monkeypatch):
    """`mlft score`'s guard runs each model's rows in a forked worker on a large input (its seeded intervals are the
    model's own): the rows and flags equal one process's, in the same order."""
    from mlft.benchmarks.lcb import scoring
    from mlft.benchmarks.lcb.metrics import ScoreOptions
    from mlft.benchmarks.lcb.scoring import analyze_all, load_resources, score_guard

    base = [c for c, _ in zip(read_completions(shared / "lcb" / "outputs" / "gpt-4-turbo.csv"), range(60))]
    junk = [c for c, _ in zip(read_completions(shared / "lcb" / "outputs" / "command-r.csv"), range(60))]
    comps = base + junk
    lid, words = load_resources("ftz", shared / "lcb" / "words")
    replies = analyze_all([(c.completion, c.language) for c in comps], lid, words, ScoreOptions(), workers=1)
    one = score_guard(comps, replies, n=1000, workers=1)
    monkeypatch.setattr(scoring, "PARALLEL_MIN_REPLIES", 10)
    forked = score_guard(comps, replies, n=1000, workers=2)
    assert {model for _, model, _, _ in one[0]} == {"gpt-4-turbo", "command-r"}
    assert forked == one and list(forked[0]) == list(one[0])


def _guard_digests(shared) -> dict[str, object]:
    """The guard of two released files (a base model that loops, an instruct model in all 15 languages) as `mlft
    score` computes it in one process: per-reply (degenerate, lexical validity) and the guard rows and flags, each
    as a SHA-256 of its canonical JSON (floats as `repr`, so a change in the last bit shows)."""
    import hashlib

    from mlft.benchmarks.lcb.scoring import score_completions, score_guard

    out = shared / "lcb" / "outputs"
    comps = read_completions(out / "command-r-base.csv") + read_completions(out / "llama-3-instruct.csv")
    report = score_completions(comps, lid="ftz", words=shared / "lcb" / "words", workers=1, guard=True)
    rows, flags = score_guard(comps, report.replies, workers=1)
    replies = [[bool(r.guard[0]), None if r.guard[1] is None else repr(r.guard[1])] for r in report.replies]
    table = [[list(key), {k: repr(v) for k, v in row.items()}] for key, row in rows.items()]
    values = [
        [list(key), {k: repr(v) for k, v in row.items() if not k.endswith(("_low", "_high"))}]
        for key, row in rows.items()
    ]

    def sha(value) -> str:
        return hashlib.sha256(json.dumps(value, sort_keys=True, default=repr).encode()).hexdigest()[:16]

    return {
        "replies": len(replies),
        "degenerate": sum(d for d, _ in replies),
        "per_reply": sha(replies),
        "values": sha(values),
        "rows": sha(table),
        "flags": sha([{k: repr(v) for k, v in f.items()} for f in flags]),
    }


@pytest.mark.slow  # measured over 40 s on the loaded machine (docs/results/test_times.json)
def test_the_guard_of_two_released_files_is_unchanged(shared):
    """Speed work on the guard changes no number: the per-reply checks, the rows' values and the flags' rows of
    13,172 released replies hash to what the code before it computed (digests of per_reply and values taken from
    that code, commit 6ae32a3). The rows with their intervals, and the flags that print them, changed once since,
    on purpose: Brown-Cai-DasGupta's edge modification of Wilson (`mlft.stats.intervals.modified_wilson`; before
    it, rows f483d286284f7c6d and flags 0cf7c5b8283fc70f; the values digest and the 67 flagged (language, metric)
    rows the same before and after)."""
    assert _guard_digests(shared) == {
        "replies": 13172,
        "degenerate": 1838,
        "per_reply": "fe9731ec9c66ed61",
        "values": "1c8a7438c155b81c",
        "rows": "3c7463dd74d46d2e",
        "flags": "1912254602383dbd",
    }


def test_the_fast_text_helpers_give_the_slow_ones_strings():
    """`_punct_spaced` (numpy for long non-ASCII text) is `str.translate` of the punctuation table on every code
    point, a lone surrogate included; `_rule_tokens` (`str.split` without Han / kana) is the token regex."""
    from mlft.benchmarks.lcb import guard

    table = guard._punct_to_space()
    points = [chr(cp) for cp in range(0x110000) if not 0xD800 <= cp < 0xE000]
    rng = random.Random(0)
    rng.shuffle(points)
    texts = ["".join(points[i : i + 500]) for i in range(0, len(points), 500)]
    texts += ["abc, def!\n  ghi", "Привет, мир! Как дела?" * 4, "x\ud800y" * 40, "é" * 63, "é" * 64, ""]
    for text in texts:
        spaced = guard._punct_spaced(text)
        assert spaced == text.translate(table)
        assert guard._rule_tokens(spaced.lower()) == guard._TOKEN.findall(spaced.lower())
    assert guard._punct_spaced("«Да», сказал он — " * 8).split()[:3] == ["Да", "сказал", "он"]


def test_forked_scoring_gives_a_language_to_one_worker_and_the_same_replies(shared, monkeypatch):
    """`analyze_all`'s forked tasks hold one language each (its tokeniser, lexicon and judged words met in one
    worker), largest first, a language over half a worker's share in near-equal parts; the replies, the guard's
    per-reply part included, equal one process's."""
    from mlft.benchmarks.lcb import scoring
    from mlft.benchmarks.lcb.metrics import ScoreOptions
    from mlft.benchmarks.lcb.scoring import _language_chunks, analyze_all, load_resources

    comps = read_completions(shared / "lcb" / "outputs" / "llama-3-instruct.csv")[::50]
    items = [(c.completion, c.language) for c in comps]
    chunks = _language_chunks(items, 2)
    assert sorted(i for chunk in chunks for i in chunk) == list(range(len(items)))
    assert all(len({items[i][1] for i in chunk}) == 1 for chunk in chunks) and len(chunks) == 15
    assert [len(c) for c in chunks] == sorted(map(len, chunks), reverse=True)
    assert [len(c) for c in _language_chunks([("x", "zh")] * 1001 + [("y", "en")] * 10, 2)] == [251, 251, 251, 248, 10]
    lid, words = load_resources("ftz", shared / "lcb" / "words")
    one = analyze_all(items, lid, words, ScoreOptions(), workers=1, guard=True)
    monkeypatch.setattr(scoring, "PARALLEL_MIN_REPLIES", 10)
    forked = analyze_all(items, lid, words, ScoreOptions(), workers=2, guard=True)
    assert [vars(r) for r in forked] == [vars(r) for r in one]
    assert sum(r.guard[1] is not None for r in one) == len(one)
