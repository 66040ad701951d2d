"""The guard's checks as a reward reads them: stricter than the guard's columns, because a reward is optimised against.

The guard's columns (`mlft.benchmarks.lcb.guard`) are calibrated on the paper's released replies and stay as they
are. The GRPO reward terms (`mlft.training.reward_terms`) read replies through the checks below instead: copies made
"different" by an invisible character or a look-alike letter are the same copy, a template with one changing word
and a loop in the tail are repeats, and a word with a Latin letter is not a word of a non-Latin language. Built on
the guard's own pieces (its tokens, tandem repeats, lexicons), so the two views differ only where this says.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter

from mlft.benchmarks.lcb.guard import (
    _BY_CHARS,
    SHARE,
    _has_letter,
    _ids,
    _lexicon,
    _pieces,
    _punct_spaced,
    _rule_tokens,
    counts_for,
    degeneracy_reason,
    tandem_cover,
)
from mlft.benchmarks.lcb.tokenize import tokenize
from mlft.languages import SCRIPT_RANGES

_GLUED_DIGITS = re.compile(r"^\d+(?=[^\W\d_])")  # digits that open a word: "12자루" is the counter 자루 after 12

# characters that render as nothing: a copy with one of them is the same copy (and the same word to a reader)
_INVISIBLE = dict.fromkeys(map(ord, "\u00ad\u034f\u061c\u115f\u1160\u180e\u200b\u200c\u200d\u200e\u200f\u2060"), None)
_INVISIBLE.update(dict.fromkeys(range(0x2061, 0x2065), None))
_INVISIBLE.update(dict.fromkeys(map(ord, "\u3164\ufeff\uffa0"), None))
# Cyrillic and Greek letters that look like Latin ones (Unicode's confusables, the common ones): folded to the
# Latin letter before copies are compared (the fold is applied to every character alike, so equal stays equal)
_LOOKALIKES = str.maketrans(
    "аеорсухіјѕԁһӏԛԝАВЕКМНОРСТХУІЈЅαορτυνικΑΒΕΖΗΙΚΜΝΟΡΤΥΧ",
    "aeopcyxijsdhlqwABEKMHOPCTXYIJSaoptvvikABEZHIKMNOPTYX",
)


def visible_text(text: str) -> str:
    """`text` as a reader sees it: NFKC (full-width letters, ligatures, compatibility forms folded) and no
    invisible characters (zero-width spaces and joiners, soft hyphens, direction marks, fillers)."""
    return unicodedata.normalize("NFKC", text).translate(_INVISIBLE)


def folded_text(text: str) -> str:
    """`visible_text` with look-alike Cyrillic / Greek letters folded to Latin: what a copy is compared as."""
    return visible_text(text).translate(_LOOKALIKES)


TEMPLATE_COPIES = 3  # sentences sharing all but one word (a run of <= TEMPLATE_GAP tokens) make a template
TEMPLATE_GAP = 3  # the changing part: CJK words are runs of character tokens
TAIL_SHARE = 0.15  # a loop (>= 3 back-to-back copies, >= TAIL_MIN_TOKENS tokens) covering this share of a reply
TAIL_MIN_TOKENS = 6
_SENTENCE = re.compile(r"[.!?。！？\n]+")


def _tokens(text: str) -> list[str]:
    """Rule 4's tokens: lowercased words once punctuation and symbols are spaces, every Han / kana character one."""
    return _rule_tokens(_punct_spaced(text).lower())


def _template_share(text: str) -> float:
    """Share of the tokens in sentences that match >= TEMPLATE_COPIES - 1 others but for one changing run of
    <= TEMPLATE_GAP tokens (`X est bon pour la santé. X est bon pour la planète. ...`), the fixed part at least
    two tokens and half the sentence."""
    sentences = [t for t in (_tokens(s) for s in _SENTENCE.split(text)) if len(t) >= 2]
    total = sum(map(len, sentences))
    if len(sentences) < TEMPLATE_COPIES or not total:
        return 0.0
    keys: dict[tuple, set[int]] = {}
    for k, s in enumerate(sentences):
        n = len(s)
        for i in range(n):
            for j in range(i + 1, min(n, i + TEMPLATE_GAP) + 1):
                fixed = n - (j - i)
                if fixed >= 2 and 2 * fixed >= n:
                    keys.setdefault((tuple(s[:i]), tuple(s[j:])), set()).add(k)
    templated = set().union(*(ks for ks in keys.values() if len(ks) >= TEMPLATE_COPIES), set())
    return sum(len(sentences[k]) for k in templated) / total


def strict_degeneracy_reason(text: str) -> str | None:
    """The reward's degeneracy: the guard's rules (`degeneracy_reason`) on the folded text (`folded_text`: a
    zero-width space or one look-alike letter per copy does not make copies differ), then
    7. `template`: sentences alike but for one changing word cover >= SHARE of the tokens (`_template_share`);
    8. `loop-tail`: a loop of >= 3 back-to-back copies (>= TAIL_MIN_TOKENS tokens) covers >= TAIL_SHARE of the
       tokens -- a reply that answers, then loops for a third of its length, passes rule 4's half.
    For the reward only (the guard's calibrated column keeps `degeneracy_reason`)."""
    folded = folded_text(text)
    reason = degeneracy_reason(folded)
    if reason is not None:
        return reason
    if _template_share(folded) >= SHARE:
        return "template"
    tokens = _tokens(folded)
    if len(tokens) >= TAIL_MIN_TOKENS:
        covered = tandem_cover(_ids(tokens), 64, 3, TAIL_MIN_TOKENS).sum()
        if covered >= TAIL_SHARE * len(tokens):
            return "loop-tail"
    return None


_LATIN_LETTER = re.compile("[A-Za-z\u00c0-\u024f]")


def strict_lexical_validity(text: str, lang: str) -> float | None:
    """`lexical_validity` of the visible text (`visible_text`), and for a target with a script of its own (ar, hi,
    ja, ko, ru, zh) a word with a Latin letter in it is not a word of the language (`Password를`, `Reset하려면`:
    the guard's rule only asks for one letter of the script). A number glued to its counter (`12자루`, `48자루가`,
    `4개에는`: how Korean writes counted things) is read as the counter: its digits are not part of the word. In
    zh / ja / ko, where words weigh by their characters, a word in another script (`multiplication`) weighs as the
    reply's mean word in the target's script, not by its letters (one English term is one word of the reply). None
    without a lexicon."""
    text = visible_text(text)
    if _lexicon(lang) is None:
        return None
    pieces = (_GLUED_DIGITS.sub("", w) for w in _pieces(text, lang, None))
    counts = [(w, n) for w, n in Counter(pieces).items() if _has_letter(w)]
    if not counts:
        return 0.0
    foreign = lang in SCRIPT_RANGES
    known = [(w, n) for w, n in counts if not (foreign and _LATIN_LETTER.search(w)) and counts_for(w, lang)]
    if lang in _BY_CHARS:
        own = [(len(w), n) for w, n in counts if not _LATIN_LETTER.search(w)]
        mean = sum(k * n for k, n in own) / sum(n for _, n in own) if own else 1.0

        def weight(w: str) -> float:
            return mean if _LATIN_LETTER.search(w) else len(w)

        return sum(weight(w) * n for w, n in known) / sum(weight(w) * n for w, n in counts)
    return sum(n for _, n in known) / sum(n for _, n in counts)


def word_tokens(line: str, lang: str) -> list[str]:
    """The words of one line as the reward counts them: the official tokenisation in `lang` (`tokenize`: jieba,
    MeCab, whitespace) of the visible line (`visible_text`) with every Unicode punctuation mark and symbol a space,
    keeping the tokens with a letter. So `…`, `«`, `»`, `–`, `·` (the official normalisation strips ASCII
    punctuation only), digits and jieba's whitespace tokens are not words, and cannot fill the 5 tokens a line
    needs to be judged."""
    clean = " ".join(_punct_spaced(visible_text(line)).split())
    return [t for t in tokenize(clean, lang) if _has_letter(t)] if clean else []


def line_words(text: str, lang: str) -> list[int]:
    """The number of words (`word_tokens`) in each line of `text`: which lines the reward judges, and their share."""
    return [len(word_tokens(line, lang)) for line in text.split("\n")]


def bare_line(line: str) -> str:
    """The visible line with punctuation and symbols as spaces, whitespace collapsed: what the reward's LID reads
    (guillemets and ellipses, which fastText reads as French, are gone)."""
    return " ".join(_punct_spaced(visible_text(line)).split())
