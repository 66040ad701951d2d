"""The `accelerate launch` command that `mlft train` re-launches itself with: on this machine, or on one node of
a SLURM allocation (one task per node; each node's launcher starts one process per GPU).

Everything here is pure (a recipe's config path and an environment mapping in, an argv out), so the command a
2-node job runs can be rendered and checked without SLURM, GPUs or `scontrol`:

    launch_command("recipes/multilingual_sft.yaml", [], "configs/accelerate/multinode_zero2.yaml",
                   slurm_allocation({"SLURM_JOB_NODELIST": "gpu-[07-08]", "SLURM_NNODES": "2",
                                     "SLURM_NODEID": "1", "SLURM_GPUS_ON_NODE": "8", "SLURM_JOB_ID": "4242"}))
    -> [python, -m, accelerate.commands.launch, --config_file /abs/configs/accelerate/multinode_zero2.yaml,
        --num_machines, 2, --num_processes, 16, --machine_rank, 1, --main_process_ip, gpu-07,
        --main_process_port, 29742, --deepspeed_config_file, /abs/configs/deepspeed/zero2.json,
        -m, mlft, train, recipes/multilingual_sft.yaml]
"""

from __future__ import annotations

import itertools
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from mlft.errors import ConfigError
from mlft.paths import resolve_path

BASE_PORT = 29500  # torch's default; SLURM jobs get BASE_PORT + job id % PORT_SPREAD (below the ephemeral range)
PORT_SPREAD = 2000


@dataclass(frozen=True)
class SlurmAllocation:
    """This node's place in a SLURM allocation, as `accelerate launch` needs it."""

    nodes: tuple[str, ...]  # host names, in SLURM's node-id order; nodes[0] runs the main process
    node_rank: int  # SLURM_NODEID: this node's index in `nodes`
    gpus_per_node: int  # processes started on each node
    port: int  # rendezvous port on nodes[0]

    @property
    def num_machines(self) -> int:
        return len(self.nodes)

    @property
    def num_processes(self) -> int:
        return self.num_machines * self.gpus_per_node

    @property
    def main_address(self) -> str:
        return self.nodes[0]


# ---------------------------------------------------------------------------------------------- nodelists


def parse_nodelist(text: str) -> list[str]:
    """Expand a SLURM hostlist the way `scontrol show hostnames` does, in order: `gpu-[07-08]`,
    `node1,node2`, `gpu-[01-03,07],cpu5`, `r[1-2]n[01-02]` (zero padding kept from the range's start)."""
    text = text.strip()
    if not text:
        raise ConfigError("SLURM nodelist is empty")
    hosts: list[str] = []
    for item in _split_top_level(text):
        parts = re.split(r"(\[[^\[\]]*\])", item)
        if not item or any("[" in p or "]" in p for p in parts if not p.startswith("[")):
            raise ConfigError(f"SLURM nodelist {text!r}: cannot parse {item!r}")
        choices = [_expand_brackets(p[1:-1], text) if p.startswith("[") else [p] for p in parts]
        hosts.extend("".join(combo) for combo in itertools.product(*choices))
    return hosts


def _split_top_level(text: str) -> list[str]:
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if depth not in (0, 1):
            raise ConfigError(f"SLURM nodelist {text!r}: unbalanced brackets")
        if ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    if depth:
        raise ConfigError(f"SLURM nodelist {text!r}: unbalanced brackets")
    items.append(text[start:])
    return [s.strip() for s in items]


def _expand_brackets(body: str, text: str) -> list[str]:
    out = []
    for rng in body.split(","):
        m = re.fullmatch(r"\s*(\d+)(?:-(\d+))?\s*", rng)
        if not m:
            raise ConfigError(f"SLURM nodelist {text!r}: bad range {rng!r} in [{body}]")
        lo, hi = m.group(1), m.group(2) or m.group(1)
        if int(hi) < int(lo):
            raise ConfigError(f"SLURM nodelist {text!r}: range {rng!r} runs backwards")
        out.extend(str(n).zfill(len(lo)) for n in range(int(lo), int(hi) + 1))
    return out


def _tasks_per_node(text: str) -> list[int]:
    """SLURM's compressed per-node task counts: `1(x2)`, `8,4`, `2(x3),1`."""
    counts = []
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d+)(?:\(x(\d+)\))?\s*", part)
        if not m:
            raise ConfigError(f"cannot parse SLURM tasks per node {text!r}")
        counts += [int(m.group(1))] * int(m.group(2) or 1)
    return counts


def _gpu_count(text: str, var: str) -> int:
    """`8`, `h100:8`, `gpu:h100:8` or `a100:2,v100:2` (SLURM's `[type:]count` per GPU type) -> the total."""
    try:
        return sum(int(part.rsplit(":", 1)[-1]) for part in text.split(","))
    except ValueError:
        raise ConfigError(f"{var}={text!r}: expected a GPU count like 8 or h100:8") from None


# ---------------------------------------------------------------------------------------------- allocation


def _int_var(env: Mapping[str, str], names: Sequence[str], what: str) -> int:
    for name in names:
        if env.get(name, "").strip():
            try:
                return int(env[name])
            except ValueError:
                raise ConfigError(f"{name}={env[name]!r}: expected an integer ({what})") from None
    raise ConfigError(
        f"{' / '.join(names)} not set ({what}): run inside a SLURM job (sbatch slurm/train.sbatch ..., srun ...)"
    )


def slurm_allocation(
    env: Mapping[str, str], gpus_per_node: int | None = None, port: int | None = None
) -> SlurmAllocation:
    """Read this node's allocation from SLURM's variables (validated, with errors naming the variable).

    Inside an `srun` step the step's node list is used (node ids are relative to it), else the job's.
    Processes per node: `gpus_per_node`, else SLURM_GPUS_ON_NODE, else SLURM_GPUS_PER_NODE. The port:
    `port`, else BASE_PORT + SLURM_JOB_ID % PORT_SPREAD (the same on every node, different across jobs).
    """
    in_step = bool(env.get("SLURM_STEP_NODELIST", "").strip())
    list_vars = ("SLURM_STEP_NODELIST",) if in_step else ("SLURM_JOB_NODELIST", "SLURM_NODELIST")
    count_vars = ("SLURM_STEP_NUM_NODES", "SLURM_NNODES") if in_step else ("SLURM_NNODES", "SLURM_JOB_NUM_NODES")
    list_var = next((v for v in list_vars if env.get(v, "").strip()), None)
    if list_var is None:
        raise ConfigError(
            f"{' / '.join(list_vars)} not set (the allocation's nodes): run inside a SLURM job "
            "(sbatch slurm/train.sbatch ..., srun ...)"
        )
    try:
        nodes = tuple(parse_nodelist(env[list_var]))
    except ConfigError as exc:
        raise ConfigError(f"{list_var}: {exc}") from None
    num_nodes = _int_var(env, count_vars, "number of nodes")
    if num_nodes != len(nodes):
        raise ConfigError(
            f"{list_var}={env[list_var]!r} names {len(nodes)} node(s) but "
            f"{next(v for v in count_vars if env.get(v))}={num_nodes}"
        )
    node_rank = _int_var(env, ("SLURM_NODEID",), "this node's index in the allocation")
    if not 0 <= node_rank < num_nodes:
        raise ConfigError(f"SLURM_NODEID={node_rank} is outside the allocation's {num_nodes} node(s)")
    tasks_var = "SLURM_STEP_TASKS_PER_NODE"
    if env.get(tasks_var, "").strip() and set(_tasks_per_node(env[tasks_var])) != {1}:
        raise ConfigError(
            f"{tasks_var}={env[tasks_var]!r}: run one task per node (srun --ntasks-per-node=1); "
            "each node's `accelerate launch` starts one process per GPU itself"
        )
    on_node = env.get("SLURM_GPUS_ON_NODE", "").strip()
    per_node = env.get("SLURM_GPUS_PER_NODE", "").strip()
    on_node_n = _gpu_count(on_node, "SLURM_GPUS_ON_NODE") if on_node else None
    per_node_n = _gpu_count(per_node, "SLURM_GPUS_PER_NODE") if per_node else None
    if on_node_n is not None and per_node_n is not None and on_node_n != per_node_n:
        raise ConfigError(
            f"SLURM_GPUS_ON_NODE={on_node_n} but SLURM_GPUS_PER_NODE={per_node_n}: every node "
            "must run the same number of processes (request --gpus-per-node)"
        )
    if gpus_per_node is None:
        gpus_per_node = on_node_n if on_node_n is not None else per_node_n
        if gpus_per_node is None:
            raise ConfigError(
                "SLURM_GPUS_ON_NODE / SLURM_GPUS_PER_NODE not set (GPUs per node): request GPUs "
                "(sbatch --gpus-per-node=8) or pass --gpus-per-node N"
            )
    elif on_node_n is not None and gpus_per_node > on_node_n:
        raise ConfigError(
            f"--gpus-per-node {gpus_per_node} but SLURM gave this node {on_node_n} GPU(s) (SLURM_GPUS_ON_NODE)"
        )
    if gpus_per_node < 1:
        raise ConfigError(f"GPUs per node must be >= 1, got {gpus_per_node}")
    total = env.get("SLURM_GPUS", "").strip()
    if total.isdigit() and int(total) != num_nodes * gpus_per_node:
        raise ConfigError(
            f"SLURM_GPUS={total} but {num_nodes} node(s) x {gpus_per_node} GPU(s) = "
            f"{num_nodes * gpus_per_node} processes: request --gpus-per-node instead of --gpus"
        )
    if port is None:
        job = env.get("SLURM_JOB_ID", "").strip()
        port = BASE_PORT + int(job) % PORT_SPREAD if job.isdigit() else BASE_PORT
    if not 0 < port < 65536:
        raise ConfigError(f"main process port {port} is not a TCP port")
    return SlurmAllocation(nodes=nodes, node_rank=node_rank, gpus_per_node=gpus_per_node, port=port)


# ---------------------------------------------------------------------------------------------- command


def _resolve(path: str) -> Path:
    """A path as written in a recipe or config (cwd first, then the project root), made absolute."""
    return resolve_path(path).resolve()


def read_accelerate_config(path: str | Path):
    """Load an accelerate config with accelerate's own loader (its schema), errors as ConfigError."""
    import yaml
    from accelerate.commands.config.config_args import ClusterConfig, load_config_from_file

    try:
        config = load_config_from_file(str(path))
    except (OSError, ValueError, TypeError, AttributeError, yaml.YAMLError) as exc:
        raise ConfigError(f"accelerate config {path}: {exc}") from None
    if not isinstance(config, ClusterConfig):
        raise ConfigError(f"accelerate config {path}: compute_environment must be LOCAL_MACHINE")
    return config


def sharded_weights(path: str | Path) -> str | None:
    """What shards the model's weights across the ranks under the accelerate config at `path` ("DeepSpeed ZeRO-3",
    "FSDP"), or None (DDP, ZeRO-1/2, one process: every rank holds whole weights). Read from the config and its
    DeepSpeed JSON, before anything is launched."""
    import json

    from accelerate.utils import DistributedType

    config = read_accelerate_config(path)
    if config.distributed_type == DistributedType.FSDP:
        return "FSDP"
    if config.distributed_type != DistributedType.DEEPSPEED:
        return None
    ds = config.deepspeed_config or {}
    stage = ds.get("zero_stage")
    name = ds.get("deepspeed_config_file")
    if name:
        file = _resolve(name)
        try:
            stage = json.loads(file.read_text(encoding="utf-8")).get("zero_optimization", {}).get("stage", stage)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"accelerate config {path}: deepspeed_config_file {name}: {exc}") from None
    return "DeepSpeed ZeRO-3" if str(stage) == "3" else None


def _check_config(config, path: Path, alloc: SlurmAllocation | None) -> Path | None:
    """Check a config can run this launch; return its DeepSpeed JSON (absolute) if it names one."""
    from accelerate.utils import DistributedType

    ds_file = None
    if config.distributed_type == DistributedType.DEEPSPEED:
        name = config.deepspeed_config.get("deepspeed_config_file")
        if name:
            ds_file = _resolve(name)
            if not ds_file.is_file():
                raise ConfigError(f"accelerate config {path}: deepspeed_config_file not found: {name}")
    if alloc is None:
        return ds_file
    if config.distributed_type == DistributedType.NO and alloc.num_processes > 1:
        raise ConfigError(
            f"accelerate config {path} runs one process (distributed_type: 'NO'), but the SLURM "
            f"allocation has {alloc.num_machines} node(s) x {alloc.gpus_per_node} GPU(s): use "
            "configs/accelerate/multinode_zero2.yaml (or any DDP/DeepSpeed/FSDP config)"
        )
    if alloc.num_machines > 1:
        launcher = config.deepspeed_config.get("deepspeed_multinode_launcher", "standard")
        if config.distributed_type == DistributedType.DEEPSPEED and launcher != "standard":
            raise ConfigError(
                f"accelerate config {path}: deepspeed_multinode_launcher: {launcher!r} starts the "
                "other nodes itself; with one SLURM task per node it must be 'standard' (torchrun)"
            )
        if (config.rdzv_backend or "static") != "static" and config.same_network:
            raise ConfigError(
                f"accelerate config {path}: rdzv_backend {config.rdzv_backend!r} with "
                "same_network: true gives torchrun no rendezvous endpoint (each node would meet "
                "only itself); use rdzv_backend: static, or same_network: false"
            )
    return ds_file


def launch_command(
    recipe: str,
    overrides: Sequence[str],
    accelerate_config: str,
    slurm: SlurmAllocation | None = None,
    extra: Sequence[str] = (),
    python: str | None = None,
) -> list[str]:
    """The argv that runs `mlft train RECIPE OVERRIDES EXTRA` under `accelerate launch`.

    Paths the launched processes read are made absolute (the accelerate config and its DeepSpeed JSON, which
    accelerate would otherwise resolve against the working directory). With `slurm`, the machine count,
    total process count, this node's rank and the main node's address and port come from the allocation
    and override the config's values, so any multi-process config serves any number of nodes.
    """
    config_path = _resolve(accelerate_config)
    if not config_path.is_file():
        raise ConfigError(f"accelerate config not found: {accelerate_config}")
    config = read_accelerate_config(config_path)
    ds_file = _check_config(config, config_path, slurm)
    cmd = [python or sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(config_path)]
    if slurm is not None:
        cmd += [
            "--num_machines",
            str(slurm.num_machines),
            "--num_processes",
            str(slurm.num_processes),
            "--machine_rank",
            str(slurm.node_rank),
            "--main_process_ip",
            slurm.main_address,
            "--main_process_port",
            str(slurm.port),
        ]
    if ds_file is not None:
        cmd += ["--deepspeed_config_file", str(ds_file)]
    return [*cmd, "-m", "mlft", "train", recipe, *overrides, *extra]
