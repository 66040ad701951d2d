"""Obtain LCB files like a user would: download into the cache with a checksum, or import a local copy.

Lookup order for each file: an explicit path (`--from`), the environment variable `MLFT_LCB_DATA`
(a folder holding the files, or the zip itself), the cache, then a download from the official repository.
`mlft data lcb --from PATH` imports a local copy into the cache once (`import_files`: the test sets, the word list,
the few-shot examples, the released outputs and lid.176.bin where PATH holds them, checksum-checked where the
official digest is known), so every later command finds them offline; `require` finds a command's files or
raises a `MissingDataError` that names both offline ways.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from mlft.errors import DataError, MissingDataError
from mlft.io.download import RemoteFile, download, file_digest, verified
from mlft.io.download import locate as _locate
from mlft.langid import LID_BIN
from mlft.paths import LCB_DATA_ENV, cache_dir, lcb_data_path

__all__ = [
    "RemoteFile",
    "download",
    "file_digest",
    "locate",
    "locate_test_sets",
    "import_files",
    "require",
    "lcb_cache",
    "REPO_RAW",
    "TEST_SETS",
    "WORDS",
    "FEW_SHOT",
    "ENV_VAR",
]

REPO_RAW = "https://raw.githubusercontent.com/for-ai/language-confusion/0cfdbb4a64502648938c456b2fa9689968f22298"

TEST_SETS = RemoteFile(
    "test_sets.zip", f"{REPO_RAW}/test_sets.zip", "3425337489fa65ff15d977e981e9748c86ce8e88ef0f4457ecdb4a65d8702712"
)
# The extracted archive (test_sets/{task}/{source}/{lang}.csv): sha256 over the sorted lines
# "{task}/{source}/{lang}.csv\0{sha256 of the file}\n" of its 66 CSV files (`tree_digest`), equal for the zip's
# members and an extracted copy.
TEST_SETS_FOLDER = "test_sets"
TEST_SETS_TREE = "cbc0b8c4bcee3e169791c5ce1066e58aed690e23c106f91a5b421e40b81ff4c2"
# The English word list the official scorer uses for WPR (its compute_metrics.py names this gist).
WORDS = RemoteFile(
    "words",
    "https://gist.githubusercontent.com/wchargin/8927565/raw/d9783627c731268fb2935a731a618aa8e95cf465/words",
    "1ec8230beef2a7c955742b089fc3cea2833866cf5482bf018d7c4124eef104bd",
)
# The paper's few-shot demonstrations: dict literals in the official few_shot_prompting.py (read as data).
FEW_SHOT = RemoteFile(
    "few_shot_prompting.py",
    f"{REPO_RAW}/few_shot_prompting.py",
    "993439da40fa468887b6fe95bcab1cefc8aec3538ba990629f032648c65b44d7",
)
FEW_SHOT_FILE = "few_shot_examples.json"  # the stored form (mlft.generation.prompting reads it)
OUTPUTS = "outputs"  # the paper's released completions, outputs/*.csv (`mlft paper-tables`)
ENV_VAR = LCB_DATA_ENV  # read by mlft.paths.lcb_data_path alone; named here in the messages
OFFLINE_HINT = f"offline, import a local copy with --from PATH or set {ENV_VAR}=PATH"
HOW_OFFLINE = (
    f"import them once with `mlft data lcb --from PATH` (PATH: test_sets.zip, or a folder holding it or its "
    f"extracted test_sets/, and `words`; the files of github.com/for-ai/language-confusion) or set "
    f"{ENV_VAR}=PATH (a folder holding them)"
)


def lcb_cache() -> Path:
    """The cache folder of LCB's files (`$MLFT_CACHE/lcb`, by default ~/.cache/mlft/lcb)."""
    return cache_dir() / "lcb"


def locate(remote: RemoteFile, explicit: str | Path | None = None, verify: bool = True) -> Path:
    """Path of a local, verified copy of `remote`: `explicit` (a file, or a folder holding it), else
    `$MLFT_LCB_DATA`, else the cache, else a download into the cache."""
    return _locate(remote, explicit, verify, data_path=lcb_data_path(), cache=lcb_cache(), offline_hint=OFFLINE_HINT)


# ---------------------------------------------------------------- the test sets: the zip or an extracted copy


def _csv_files(folder: Path) -> dict[str, Path]:
    root = folder / TEST_SETS_FOLDER if (folder / TEST_SETS_FOLDER).is_dir() else folder
    return {p.relative_to(root).as_posix(): p for p in root.glob("*/*/*.csv")}


def tree_digest(files: dict[str, Path]) -> str:
    """sha256 over the sorted `name\\0sha256(file)\\n` lines of an extracted archive's CSV files."""
    h = hashlib.sha256()
    for key in sorted(files):
        h.update(f"{key}\0{file_digest(files[key])}\n".encode())
    return h.hexdigest()


def _verified_tree(folder: Path, verify: bool = True) -> Path:
    files = _csv_files(folder)
    if not files:
        raise DataError(f"{folder}: no test_sets/<task>/<source>/<lang>.csv files inside")
    if verify and tree_digest(files) != TEST_SETS_TREE:
        raise DataError(
            f"{folder}: not the official extracted test_sets (its CSV files differ); "
            "pass --no-verify to use a modified copy"
        )
    return folder


def locate_test_sets(explicit: str | Path | None = None, verify: bool = True) -> Path:
    """The test sets, as a zip or an extracted folder: `explicit` (the zip, a folder holding it, or an extracted
    folder: used as given, as before), else `$MLFT_LCB_DATA`, else the cache (the zip, or a folder imported by
    `mlft data lcb --from`), else a download into the cache."""
    if explicit is not None:
        given = Path(explicit)
        if given.is_dir() and not (given / TEST_SETS.name).is_file():
            return given  # an extracted copy, read as the user gave it
        return locate(TEST_SETS, given, verify)
    env = lcb_data_path()
    if env and env.is_dir() and not (env / TEST_SETS.name).is_file() and _csv_files(env):
        return env
    cached_zip = lcb_cache() / TEST_SETS.name
    cached_tree = lcb_cache() / TEST_SETS_FOLDER
    if not (cached_zip.is_file() and file_digest(cached_zip) == TEST_SETS.digest) and cached_tree.is_dir():
        try:
            return _verified_tree(cached_tree)
        except DataError:
            pass  # a damaged import: download the zip instead
    return locate(TEST_SETS, None, verify)


# ---------------------------------------------------------------- `mlft data lcb --from PATH`: import into the cache


@dataclass
class Imported:
    """What `import_files` put into the cache (name -> cached path) and what the source did not hold."""

    cache: Path
    files: dict[str, Path] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)


def _copy(src: Path, dest: Path) -> Path:
    """Copy to a temporary name beside `dest`, then move: never a half-copied file in the cache."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.")
    os.close(fd)
    shutil.copyfile(src, tmp)
    os.replace(tmp, dest)
    return dest


def _few_shot_json(path: Path) -> Path:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{path}: unreadable few-shot examples ({exc})") from None
    if not isinstance(data, dict) or not {"monolingual", "crosslingual"} <= set(data):
        raise DataError(f"{path}: few-shot examples need 'monolingual' and 'crosslingual' entries")
    return path


def import_files(source: str | Path, convert_few_shot: Callable[[bytes], bytes] | None = None) -> Imported:
    """Copy LCB's files from `source` into the cache, each checked: the test sets (test_sets.zip against the
    official sha256, or an extracted test_sets/ against its tree digest), `words` (sha256), the few-shot examples
    (few_shot_examples.json, checked for both tasks; or the official few_shot_prompting.py, sha256, stored as
    JSON by `convert_few_shot`), the released outputs/*.csv (copied: no official digest) and lid.176.bin (md5).
    `source` is test_sets.zip itself or a folder holding any of these. A file that fails its check raises a
    DataError and nothing of it reaches the cache."""
    src = Path(source)
    cache = lcb_cache()
    out = Imported(cache)
    if src.is_file():
        out.files[TEST_SETS.name] = _copy(verified(src, TEST_SETS), cache / TEST_SETS.name)
        out.missing = [WORDS.name, FEW_SHOT_FILE]
        return out
    if not src.is_dir():
        raise DataError(f"{source}: no such file or folder")
    if (src / TEST_SETS.name).is_file():
        out.files[TEST_SETS.name] = _copy(verified(src / TEST_SETS.name, TEST_SETS), cache / TEST_SETS.name)
    elif _csv_files(src):
        files = _csv_files(_verified_tree(src))
        for key, path in files.items():
            _copy(path, cache / TEST_SETS_FOLDER / key)
        out.files[TEST_SETS_FOLDER] = cache / TEST_SETS_FOLDER
    else:
        out.missing.append(TEST_SETS.name)
    for remote in (WORDS, LID_BIN):
        if (src / remote.name).is_file():
            out.files[remote.name] = _copy(verified(src / remote.name, remote), cache / remote.name)
        elif remote is WORDS:
            out.missing.append(WORDS.name)
    if (src / FEW_SHOT_FILE).is_file():
        out.files[FEW_SHOT_FILE] = _copy(_few_shot_json(src / FEW_SHOT_FILE), cache / FEW_SHOT_FILE)
    elif (src / FEW_SHOT.name).is_file() and convert_few_shot is not None:
        raw = verified(src / FEW_SHOT.name, FEW_SHOT).read_bytes()
        try:
            data = convert_few_shot(raw)
        except (ValueError, SyntaxError) as exc:
            raise DataError(f"{src / FEW_SHOT.name}: unexpected content ({exc})") from None
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / FEW_SHOT_FILE).write_bytes(data)
            out.files[FEW_SHOT_FILE] = _copy(Path(tmp) / FEW_SHOT_FILE, cache / FEW_SHOT_FILE)
    else:
        out.missing.append(FEW_SHOT_FILE)
    outputs = sorted((src / OUTPUTS).glob("*.csv"))
    for f in outputs:
        _copy(f, cache / OUTPUTS / f.name)
    if outputs:
        out.files[OUTPUTS] = cache / OUTPUTS
    return out


# ---------------------------------------------------------------- a command's files, or one clear refusal


def require(
    what: str, remotes: tuple[RemoteFile, ...] = (TEST_SETS, WORDS), extra: dict[str, Callable[[], Path]] | None = None
) -> dict[str, Path]:
    """{name: local path} of every file `what` (e.g. "the demo") needs: `remotes` (the test sets as the zip or an
    imported folder) from $MLFT_LCB_DATA, the cache or a checksum-checked download, and `extra` (name -> a
    locating function, e.g. the few-shot examples'). Raises MissingDataError naming every missing file, why the
    download failed, and both offline ways (`mlft data lcb --from PATH`, $MLFT_LCB_DATA)."""
    found: dict[str, Path] = {}
    failed: list[tuple[str, str]] = []
    finders = {r.name: (lambda r=r: locate_test_sets() if r is TEST_SETS else locate(r)) for r in remotes}
    for name, find in {**finders, **(extra or {})}.items():
        try:
            found[name] = find()
        except DataError as exc:
            failed.append((name, str(exc)))
    if failed:
        env = lcb_data_path()
        where = f"${ENV_VAR} ({env})" if env else f"${ENV_VAR} (unset)"
        why = failed[0][1].split("; offline")[0]
        raise MissingDataError(
            f"{what} needs the LCB file(s) {', '.join(n for n, _ in failed)}: not in {where}, not in the cache "
            f"{lcb_cache()}, and the download failed ({why}). Offline, {HOW_OFFLINE}."
        )
    return found
