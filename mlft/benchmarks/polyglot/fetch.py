"""Download the Polyglot-or-Not parquet files (the paper's versions) into the cache, checked by md5.

Source: https://github.com/daniel-furman/Polyglot-or-Not — translated files at HEAD 9ccbffd, English at
40d7db0 (the paper's 26,254 facts; HEAD's English file has 13 more rows and changed false sets).
"""

from __future__ import annotations

from pathlib import Path

from mlft.benchmarks.polyglot.data import LANGUAGES
from mlft.io.download import RemoteFile, download, file_digest
from mlft.paths import cache_dir

_RAW = "https://raw.githubusercontent.com/daniel-furman/Polyglot-or-Not"
_HEAD = "9ccbffd2e098217d14de75ef4b0269b12c0d233b"
_EN = "40d7db0164c1fccb687cb058674371e3b731dce2"
# language -> (date part of the file name, md5)
FILES = {
    "bg": ("4-10-23", "de98206d0797f4736ed4527ba06cb6bc"),
    "ca": ("4-12-23", "61d3cf82d06de02dd8213e5311a84891"),
    "cs": ("4-10-23", "581fb8307e8c372b5c80a7696d9fb925"),
    "da": ("4-12-23", "70f5653b393bcdcd91e28a874dfe4bc5"),
    "de": ("4-7-23", "af6fd6558849dc914d7bad821d02a391"),
    "en": ("3-21-23", "cf60ae506812e9bd6f480cfbddcb6e67"),
    "es": ("4-8-23", "1eeb209478fdb23fbf56f4ed2bc05b3e"),
    "fr": ("4-5-23", "71516404fedcb4149366d9e3cbfc2642"),
    "hr": ("4-12-23", "9ece2c2da3d3210756eb2b3bce6dfe9f"),
    "hu": ("4-12-23", "6cf2089e3be3693adf83c8ea4dc298fb"),
    "it": ("4-9-23", "72636cfb1245f699897986eb5a802864"),
    "nl": ("4-12-23", "1ccfa5729425b1153b2cffe836743a1d"),
    "pl": ("4-12-23", "5c3b53b91d299f525ead4f682cf2ac88"),
    "pt": ("4-8-23", "ebf04b533609ec702154f38f0e74061b"),
    "ro": ("4-5-23", "44ea9130767beabdcad90c901d911e95"),
    "ru": ("4-7-23", "5fed71d2de4f05ddd7c04c5a73a3a674"),
    "sl": ("4-12-23", "bb56875c6468d56c4cd8b24081a9495b"),
    "sr": ("4-12-23", "652811b8d6e8651f716f1390c7773c4b"),
    "sv": ("4-10-23", "5f169c497bdbb5413381caf445e2b733"),
    "uk": ("4-9-23", "87dbf3760b5d83bcc56a55c56f0d869c"),
}
assert set(FILES) == set(LANGUAGES)


def url_of(lang: str) -> str:
    date, _ = FILES[lang]
    if lang == "en":
        return f"{_RAW}/{_EN}/data/ingested_data/en-fact-completion-{date}.parquet"
    return f"{_RAW}/{_HEAD}/data/ingested_data/translated_versions/{lang}-fact-completion-{date}.parquet"


def md5_of(path: Path) -> str:
    return file_digest(path, "md5")


def fetch(languages=LANGUAGES, dest: Path | None = None, progress: bool = True) -> list[Path]:
    """Download `{dest}/{lang}.parquet` (skipping verified files already there); returns the paths."""
    dest = Path(dest) if dest else cache_dir() / "polyglot"
    dest.mkdir(parents=True, exist_ok=True)
    out = []
    for lang in languages:
        path = dest / f"{lang}.parquet"
        remote = RemoteFile(path.name, url_of(lang), FILES[lang][1], algo="md5")
        if not (path.is_file() and md5_of(path) == remote.digest):
            download(remote, path, "offline, copy the parquet files into a folder and set MLFT_POLYGLOT_DATA")
            if progress:
                print(f"wrote {path}")
        out.append(path)
    return out
