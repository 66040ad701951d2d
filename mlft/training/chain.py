"""Model chains: what a run's saved weights need to load, kept inside its run directory.

A run whose `model:` is another run's output (DPO on an SFT adapter, SFT on a full SFT model, ...) trains
base → ancestor adapters merged in order → its own weights. So that every checkpoint and `final/` loads,
anywhere, to exactly the model that was trained, `mlft train` writes on the run's first start:

    chain.json        machine-readable chain: the root base as the user wrote it (embedded name or hub id, never
                      a cache path) or its copy, the ancestor adapters in merge order, the starting model, the
                      trainer/method/dtype and a `lineage` list (root model, then one entry per training run)
                      for model cards
    chain/base/       a copy of the root base when it is a local folder (e.g. a full SFT run's final/)
    chain/N-NAME/     copies of the ancestor adapters (a few MB each); each loads to the model merged up to it,
                      so the last one is the run's starting model (resumes and step-0 evaluations use it)

A LoRA run's adapter folders (checkpoints/checkpoint-N, final/ or final_adapter/) get a portable
`base_model_name_or_path` in adapter_config.json: the root reference when nothing is merged under the adapter
(plain peft loads it), else mlft.generation.models.CHAIN_SENTINEL (plain peft fails loudly instead of silently
loading base + adapter) and an `mlft_chain.json` with paths relative to the folder, which
mlft.generation.models.load follows. A chained LoRA run's `final/` holds the merged full weights (loads with
plain transformers, uploadable as is); its adapter is kept in `final_adapter/`. Full-weight runs save complete
models, so their checkpoints need no chain; the copies still keep their starting model reproducible.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

from transformers import TrainerCallback

from mlft.errors import ConfigError
from mlft.generation.models import CHAIN_FILE, CHAIN_SENTINEL, ModelRef, load, portable_ref, resolve
from mlft.paths import project_root

CHAIN_JSON = "chain.json"
CHAIN_DIR = "chain"
FORMAT = 1
# trainer state in checkpoint folders: not needed to load the weights, so never copied into a chain
_NOT_WEIGHTS = (
    "optimizer.pt",
    "scheduler.pt",
    "scaler.pt",
    "rng_state*.pth",
    "trainer_state.json",
    "training_args.bin",
    "global_step*",
    "latest",
    "zero_to_fp32.py",
    CHAIN_FILE,
)


def read(run_dir: Path) -> dict:
    path = Path(run_dir) / CHAIN_JSON
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: unreadable ({exc})") from None
    if info.get("format") != FORMAT:
        raise ConfigError(f"{path}: format {info.get('format')!r} is not {FORMAT} (written by another mlft)")
    return info


def is_chained(info: dict) -> bool:
    """True when the run's adapters load only with files of the run directory (not a bare embedded/hub base)."""
    return bool(info["merge"]) or "path" in info["base"]


def start_ref(run_dir: Path, info: dict) -> str:
    """A model reference (for mlft.generation.models.resolve) to the run's starting model."""
    start = info["start"]
    return start["ref"] if "ref" in start else str(Path(run_dir) / start["path"])


def prepare(recipe, run_dir: Path) -> dict:
    """The run's chain: read from chain.json, or built from `recipe.model` on the first start (main process)."""
    run_dir = Path(run_dir)
    if (run_dir / CHAIN_JSON).is_file():
        return read(run_dir)
    mref = resolve(recipe.model)
    root = mref.base if mref.kind == "adapter" else mref
    adapters = [*mref.merge, mref.path] if mref.kind == "adapter" else []
    tmp = run_dir / f"{CHAIN_DIR}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    if root.kind in ("embedded", "hub"):
        base = {"ref": root.name}
    else:
        _copy(root.path, tmp / "base")
        base = {"path": f"{CHAIN_DIR}/base"}
    merge: list[str] = []
    for i, adapter in enumerate(adapters, 1):
        name = f"{i}-{_label(Path(adapter))}"
        _copy(adapter, tmp / name)
        mark_adapter(tmp / name, base, merge, run_dir, _dtype(recipe.dtype), at=run_dir / CHAIN_DIR / name)
        merge.append(f"{CHAIN_DIR}/{name}")
    if tmp.exists():
        shutil.rmtree(run_dir / CHAIN_DIR, ignore_errors=True)
        os.replace(tmp, run_dir / CHAIN_DIR)
    info = {
        "format": FORMAT,
        "source": recipe.model,
        "base": base,
        "merge": merge,
        "start": {"path": merge[-1]} if merge else base,
        "trainer": recipe.trainer,
        "method": "lora" if recipe.lora.enabled else "full",
        "dtype": _dtype(recipe.dtype),
        "lineage": _lineage(recipe, mref, root, run_dir),
    }
    info["chained"] = is_chained(info)
    path = run_dir / CHAIN_JSON
    path.with_suffix(".tmp").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    os.replace(path.with_suffix(".tmp"), path)
    return info


def mark_adapter(
    folder: Path, base: dict, merge: list[str], run_dir: Path, dtype: str | None, at: Path | None = None
) -> None:
    """Make adapter `folder` load without absolute paths: portable base_model_name_or_path (the root reference,
    or CHAIN_SENTINEL when adapters lie under it) and mlft_chain.json. `base`/`merge` are relative to `run_dir`;
    the file's paths are relative to the folder's place in the run, `at` (default: `folder`)."""
    folder = Path(folder)

    def rel(path: str) -> str:
        return os.path.relpath(run_dir / path, at or folder)

    chained = bool(merge) or "path" in base
    config_file = folder / "adapter_config.json"
    config = json.loads(config_file.read_text(encoding="utf-8"))
    old = config.get("base_model_name_or_path")
    config["base_model_name_or_path"] = CHAIN_SENTINEL if chained else base["ref"]
    config_file.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    readme = folder / "README.md"
    if old and readme.is_file():  # peft's model card names the base too (base_model, a tag): the root or nothing
        text = readme.read_text(encoding="utf-8")
        if "ref" in base:
            text = text.replace(old, base["ref"])
        else:
            text = "".join(line for line in text.splitlines(keepends=True) if old not in line)
        readme.write_text(text, encoding="utf-8")
    spec_file = folder / CHAIN_FILE
    if not chained:
        spec_file.unlink(missing_ok=True)
        return
    spec = {
        "format": FORMAT,
        "base": {"ref": base["ref"]} if "ref" in base else {"path": rel(base["path"])},
        "merge": [rel(m) for m in merge],
        "dtype": dtype,
    }
    spec_file.write_text(json.dumps(spec, indent=2) + "\n", encoding="utf-8")


def mark_run_adapter(folder: Path, run_dir: Path, info: dict) -> None:
    """mark_adapter for an adapter folder saved by the run itself (a checkpoint or the final adapter)."""
    mark_adapter(folder, info["base"], info["merge"], Path(run_dir), info["dtype"])


def write_merged(adapter_dir: Path, out: Path, dtype: str) -> None:
    """Save `adapter_dir`'s model (chain merged in, as mlft.generation.models.load rebuilds it) as full weights."""

    model, tok = load(str(adapter_dir), dtype=dtype, device="cpu")  # beside training: keep GPU memory free
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    del model
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)


class ChainCallback(TrainerCallback):
    """After each checkpoint save (before the eval callback loads it), make its adapter portable."""

    def __init__(self, run_dir: Path, info: dict):
        self.run_dir = Path(run_dir)
        self.info = info

    def on_save(self, args, state, control, **kwargs):
        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if state.is_world_process_zero and (folder / "adapter_config.json").is_file():
            mark_run_adapter(folder, self.run_dir, self.info)


# -- helpers ---------------------------------------------------------------------------------------------
def _dtype(dtype: str) -> str | None:
    return None if dtype == "auto" else dtype


def _copy(src: str, dst: Path) -> None:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(*_NOT_WEIGHTS))


def _run_of(folder: Path) -> Path | None:
    """The run directory that saved `folder` (final/, final_adapter/, checkpoints/checkpoint-N), if any."""
    run = folder.parent.parent if folder.parent.name == "checkpoints" else folder.parent
    if folder.name in ("final", "final_adapter") or folder.parent.name == "checkpoints":
        return run if (run / "recipe.yaml").is_file() else None
    return None


def _label(adapter: Path) -> str:
    """Name of an adapter's copy: `RUN-final`, `RUN-checkpoint-N`, or a copy's name without its index."""
    run = _run_of(adapter)
    name = f"{run.name}-{adapter.name}" if run else re.sub(r"^\d+-", "", adapter.name)
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name) or "adapter"


def _rel_project(path: str) -> str:
    try:
        return str(Path(path).resolve().relative_to(project_root()))
    except ValueError:
        return path


def _run_entry(recipe: dict, name: str) -> dict:
    lora = recipe.get("lora") or {}
    entry = {
        "run": name,
        "trainer": recipe.get("trainer"),
        "method": "lora" if lora.get("enabled") else "full",
        "mix": _rel_project(recipe.get("mix", "")),
        "dtype": recipe.get("dtype"),
    }
    if lora.get("enabled"):
        entry["lora"] = {k: lora.get(k) for k in ("r", "alpha", "dropout", "target_modules")}
    return entry


def _output_step(run: Path, folder: Path) -> int | None:
    m = re.fullmatch(r"checkpoint-(\d+)", folder.name)
    if m:
        return int(m.group(1))
    try:
        return json.loads((run / "complete").read_text(encoding="utf-8")).get("global_step")
    except (OSError, ValueError):
        return None


def _lineage(recipe, mref: ModelRef, root: ModelRef, run_dir: Path) -> list[dict]:
    """[root model, each earlier training run (with the output used), this run] for model cards."""
    import yaml

    source = Path(mref.path)
    parent = _run_of(source) if mref.kind in ("adapter", "local") else None
    if parent is not None and (parent / CHAIN_JSON).is_file():
        lineage = [dict(e) for e in read(parent)["lineage"]]
    else:
        lineage = [{"model": portable_ref(root.name) if root.kind in ("embedded", "hub") else root.name}]
        if parent is not None:
            lineage.append(
                _run_entry(yaml.safe_load((parent / "recipe.yaml").read_text(encoding="utf-8")) or {}, parent.name)
            )
        elif mref.kind == "adapter":
            lineage.append({"adapter": mref.name, "merged": len(mref.merge) + 1})
    if parent is not None:
        lineage[-1].update(output=source.name, global_step=_output_step(parent, source))
    lineage.append(_run_entry(recipe.to_dict(), run_dir.name))
    return lineage
