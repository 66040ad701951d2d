"""Cross-lingual rows from a parallel hub dataset: one configuration per language, rows aligned by an id.

Shaped for MBZUAI/Bactrian-X: 52 configurations named by ISO 639-1 code (all 15 LCB languages among them),
split `train`, string fields instruction / input / id / output, the same ~67k ids in every configuration.
Its instructions are Google-translated Alpaca and Dolly prompts and each language's output is gpt-3.5-turbo's
answer to that language's translation, so replies align in content, not word for word.

For each requested reply language X (a cell of the mix) and each id of X's configuration, the instruction
language A is a seeded choice among `parallel.instruction_languages` other than X, and the row is
  crosslingual        user: instruction_A (+ input_A) with a request for X written in A; assistant: output_X
  crosslingual_pairs  the same prompt; chosen output_X, rejected output_A (same content, the wrong language)
The request uses mlft's training phrasings (mlft.data.phrasings), never LCB's. With `skip_language_mentions`
(default) ids whose English instruction or input names one of the 15 languages or asks for a translation are
skipped: "Translate this into French" plus "Korean only, please." would teach a contradiction. Ids missing
from A's configuration, and empty instructions or outputs, count as malformed rows.
"""

from __future__ import annotations

from mlft.config import did_you_mean
from mlft.data.crosslingual import crosslingual_prompt, pick_instruction_language
from mlft.data.language_codes import to_lcb_code
from mlft.data.normalize import check_columns
from mlft.data.pairs import pair
from mlft.data.pool import Pool
from mlft.data.text import units
from mlft.errors import ConfigError, DataError
from mlft.languages import LANGUAGES, check_language

BUILD_KIND = {"crosslingual": "sft", "crosslingual_pairs": "dpo"}
# The columns a parallel source reads (Alpaca / Bactrian-X names by default; `columns:` renames them).
DEFAULT_COLUMNS = {"prompt": "instruction", "input": "input", "response": "output"}
ROLES = tuple(DEFAULT_COLUMNS)
_MENTIONS = {name.lower() for name in LANGUAGES.values()}


def subset_languages(src) -> dict[str, str]:
    """{configuration name: LCB code} of a validated parallel source."""
    return {name: to_lcb_code(name, src.language_map) for name in src.parallel.subsets}


def _targets(src) -> list[str]:
    if src.languages:
        return list(src.languages)
    return list(subset_languages(src).values())


def validate_parallel(src, kind: str, w: str) -> None:
    """Check a source with a `parallel:` block before any data is read; raises ConfigError naming the key."""
    par = src.parallel
    if BUILD_KIND[par.build] != kind:
        raise ConfigError(
            f"{w}.parallel.build: {par.build!r} makes {BUILD_KIND[par.build]} rows, the mix is kind {kind!r}"
        )
    if src.format not in (None, "instruction"):
        raise ConfigError(f"{w}.format: parallel sources read `instruction` rows, not {src.format!r}")
    for role in src.columns:
        if role not in ROLES:
            raise ConfigError(
                f"{w}.columns: unknown role {role!r} for a parallel source{did_you_mean(role, ROLES)}; "
                f"valid: {', '.join(ROLES)}"
            )
    for key in ("language", "language_column", "subset"):
        if getattr(src, key):
            raise ConfigError(f"{w}.{key}: a parallel source takes its languages from `parallel.subsets`; drop it")
    if not par.subsets:
        raise ConfigError(f"{w}.parallel.subsets: list the dataset's configurations to read, one per language")
    codes: dict[str, str] = {}
    for name in par.subsets:
        code = to_lcb_code(name, src.language_map)
        if code is None:
            raise ConfigError(
                f"{w}.parallel.subsets: {name!r} is not one of the 15 LCB languages; map it with "
                f"`language_map: {{{name}: <code>}}` or drop it"
            )
        if code in codes:
            raise ConfigError(f"{w}.parallel.subsets: {name!r} and {codes[code]!r} are both {code!r}")
        codes[code] = name
    for lang in par.instruction_languages:
        check_language(lang, f"{w}.parallel.instruction_languages")
        if lang not in codes:
            raise ConfigError(
                f"{w}.parallel.instruction_languages: {lang!r} is not among the subsets ({', '.join(codes)})"
            )
    if not par.instruction_languages:
        raise ConfigError(f"{w}.parallel.instruction_languages: give at least one language")
    for lang in _targets(src):
        check_language(lang, f"{w}.languages")
        if lang not in codes:
            raise ConfigError(f"{w}.languages: {lang!r} is not among the subsets ({', '.join(codes)})")
        if not set(par.instruction_languages) - {lang}:
            raise ConfigError(
                f"{w}.languages: reply language {lang!r} needs an instruction language other than "
                f"itself in parallel.instruction_languages"
            )
    if par.skip_language_mentions and "en" not in codes:
        raise ConfigError(
            f"{w}.parallel.skip_language_mentions: needs the English configuration among the "
            "subsets (the check reads the English instruction); add it or set it to false"
        )


def _load(src, name: str, where: str):
    try:
        import datasets
    except ImportError:
        raise DataError(
            f"{where}: reading hub sources needs the `datasets` package (pip install 'mlft[train]')"
        ) from None
    try:
        return datasets.load_dataset(src.path, name, split=src.split, revision=src.revision)
    except Exception as exc:  # noqa: BLE001 - connection, file, schema, auth...: report them all with the source named
        raise DataError(
            f"{where}.path: could not load hub dataset {src.path!r} ({name}, split {src.split}"
            f"{', revision ' + src.revision if src.revision else ''}): {type(exc).__name__}: {exc}"
        ) from None


def mentions_language(text: str) -> bool:
    """True when `text` names one of the 15 LCB languages (in English) or asks for a translation."""
    return any(u in _MENTIONS or u.startswith("translat") for u in units(text))


class _Side:
    """One configuration: its rows by id."""

    def __init__(self, dataset, cols: dict, id_column: str, where: str):
        names = list(dataset.column_names)
        check_columns(names, "instruction", cols, where)
        if id_column not in names:
            raise DataError(
                f"{where}.parallel.id_column: column {id_column!r} not found; the data has {', '.join(names)}"
            )
        self.dataset = dataset
        self.ids = [str(v) for v in dataset[id_column]]
        self.index = {}
        for k, rid in enumerate(self.ids):
            self.index.setdefault(rid, k)

    def row(self, rid: str) -> dict | None:
        k = self.index.get(rid)
        return None if k is None else self.dataset[k]


def load_parallel_pool(src, targets: list[str], where: str) -> Pool:
    """A Pool of cross-lingual rows (see the module doc) for the reply languages `targets`."""
    par = src.parallel
    by_code = {code: name for name, code in subset_languages(src).items()}
    cols = {**DEFAULT_COLUMNS, **src.columns, "system": None}
    needed = set(targets) | {a for x in targets for a in par.instruction_languages if a != x}
    if par.skip_language_mentions:
        needed.add("en")
    sides = {
        code: _Side(_load(src, by_code[code], where), cols, par.id_column, f"{where} ({by_code[code]})")
        for code in sorted(needed)
    }
    skipped: set[str] = set()
    if par.skip_language_mentions:
        en = sides["en"]
        texts = zip(
            en.ids,
            en.dataset[cols["prompt"]],
            en.dataset[cols["input"]] if cols["input"] in en.dataset.column_names else [""] * len(en.ids),
        )
        skipped = {rid for rid, instruction, inp in texts if mentions_language(f"{instruction or ''} {inp or ''}")}
    keys = [(x, rid) for x in targets for rid in sides[x].ids if rid not in skipped]

    def text(row, role) -> str:
        value = row.get(cols[role]) if row is not None and cols[role] else None
        return value.strip() if isinstance(value, str) else ""

    def example(k: int):
        x, rid = keys[k]
        a = pick_instruction_language(rid, x, par.instruction_languages)
        row_a, row_x = sides[a].row(rid), sides[x].row(rid)
        row_id = f"{src.name}:{a}>{x}:{rid}"
        instruction, reply = text(row_a, "prompt"), text(row_x, "response")
        if not instruction or not reply:
            return row_id, None
        prompt = crosslingual_prompt(instruction, x, f"{src.name}/{rid}", a, text(row_a, "input") or None)
        if par.build == "crosslingual":
            return row_id, {"messages": [{"role": "user", "content": prompt}, {"role": "assistant", "content": reply}]}
        rejected = text(row_a, "response")
        if not rejected or rejected == reply:
            return row_id, None
        return row_id, pair(prompt, reply, rejected)

    return Pool(src.name, [x for x, _ in keys], example)
