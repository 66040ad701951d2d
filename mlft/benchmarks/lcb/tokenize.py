"""Tokenisation in the *expected* language, as the official scorer does it.

zh: jieba (whitespace tokens count), ja: fugashi `-O wakati` with unidic-lite, others: `str.split()`.
"""

from __future__ import annotations

import functools

_jieba = None
_tagger = None


def _zh(line: str) -> list[str]:
    global _jieba
    if _jieba is None:
        import logging

        import jieba

        jieba.setLogLevel(logging.WARNING)
        jieba.initialize()
        _jieba = jieba
    return list(_jieba.cut(line))


def _ja(line: str) -> list[str]:
    global _tagger
    if _tagger is None:
        from fugashi import Tagger

        _tagger = Tagger("-O wakati -b 50000")
    return _tagger.parse(line).split()


@functools.lru_cache(maxsize=1 << 18)
def tokenize(line: str, lang: str) -> list[str]:
    if lang == "zh":
        return _zh(line)
    if lang == "ja":
        return _ja(line)
    return line.split()
