"""Multi-node launch: the `accelerate launch` command each node of a SLURM allocation runs, rendered from a fake
SLURM environment (no SLURM, GPUs or scontrol here); the shipped accelerate configs against accelerate's own
loader; slurm/train.sbatch run with a fake srun; and one real 2-"node" launch on this machine."""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from mlft.cli import main
from mlft.errors import ConfigError
from mlft.training.launch import (
    SlurmAllocation,
    launch_command,
    parse_nodelist,
    read_accelerate_config,
    slurm_allocation,
)
from tests.training_helpers import REPO, env

SBATCH = REPO / "slurm" / "train.sbatch"
GPU_RECIPE = "recipes/multilingual_sft.yaml"
MULTINODE = "configs/accelerate/multinode_zero2.yaml"
CONFIGS = sorted((REPO / "configs" / "accelerate").glob("*.yaml"))
# What sbatch --nodes=2 --gpus-per-node=8 (job 4242, nodes gpu-07 and gpu-08) exports to each task.
JOB = {
    "SLURM_JOB_ID": "4242",
    "SLURM_JOB_NODELIST": "gpu-[07-08]",
    "SLURM_NNODES": "2",
    "SLURM_GPUS_ON_NODE": "8",
    "SLURM_GPUS_PER_NODE": "8",
}


def _node(rank: int, **extra: str) -> dict:
    return {**JOB, "SLURM_NODEID": str(rank), **extra}


def _expected(
    rank: int, config: str = MULTINODE, ds: str | None = "configs/deepspeed/zero2.json", tail: tuple[str, ...] = ()
) -> list[str]:
    """The exact argv of node `rank` of the 2 x 8-GPU job (port 29500 + 4242 % 2000 = 29742)."""
    cmd = [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--config_file",
        str(REPO / config),
        "--num_machines",
        "2",
        "--num_processes",
        "16",
        "--machine_rank",
        str(rank),
        "--main_process_ip",
        "gpu-07",
        "--main_process_port",
        "29742",
    ]
    if ds:
        cmd += ["--deepspeed_config_file", str(REPO / ds)]
    return [*cmd, "-m", "mlft", "train", GPU_RECIPE, *tail]


@pytest.fixture(autouse=True)
def _offline_lcb(shared, monkeypatch):
    monkeypatch.setenv("MLFT_LCB_DATA", str(shared / "lcb"))
    for key in list(os.environ):
        if key.startswith("SLURM_") or key in ("MLFT_LAUNCHED", "LOCAL_RANK", "ACCELERATE_MIXED_PRECISION"):
            monkeypatch.delenv(key)
    monkeypatch.chdir(REPO)


# ---------------------------------------------------------------------------------------------- nodelists


@pytest.mark.parametrize(
    "text, hosts",
    [
        ("gpu-[07-08]", ["gpu-07", "gpu-08"]),
        ("node1,node2", ["node1", "node2"]),
        ("gpu-07", ["gpu-07"]),
        ("gpu-[01-03,07],cpu5", ["gpu-01", "gpu-02", "gpu-03", "gpu-07", "cpu5"]),
        ("node[9-11]", ["node9", "node10", "node11"]),
        ("node[098-100]", ["node098", "node099", "node100"]),
        ("r[1-2]n[01-02]", ["r1n01", "r1n02", "r2n01", "r2n02"]),
        ("gpu[1-2]-ib,login", ["gpu1-ib", "gpu2-ib", "login"]),
    ],
)
def test_nodelist_expands_like_scontrol_show_hostnames(text, hosts):
    assert parse_nodelist(text) == hosts


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "empty"),
        ("gpu-[07-08", "unbalanced brackets"),
        ("gpu-]07[", "unbalanced brackets"),
        ("gpu-[[1-2]]", "unbalanced brackets"),
        ("gpu-[08-07]", "runs backwards"),
        ("gpu-[a-b]", "bad range 'a-b'"),
        ("gpu-[]", "bad range"),
        ("a,,b", "cannot parse ''"),
    ],
)
def test_unparsable_nodelist_is_named(text, message):
    with pytest.raises(ConfigError, match=message):
        parse_nodelist(text)


# ---------------------------------------------------------------------------------------------- allocation


def test_two_node_allocation_from_the_slurm_environment():
    for rank in (0, 1):
        alloc = slurm_allocation(_node(rank))
        assert alloc == SlurmAllocation(nodes=("gpu-07", "gpu-08"), node_rank=rank, gpus_per_node=8, port=29742)
        assert (alloc.num_machines, alloc.num_processes, alloc.main_address) == (2, 16, "gpu-07")


def test_allocation_sources_and_precedence():
    # only SLURM_GPUS_PER_NODE (typed), the older SLURM_NODELIST / SLURM_JOB_NUM_NODES names, no job id
    alloc = slurm_allocation(
        {
            "SLURM_NODELIST": "node1,node2,node3",
            "SLURM_JOB_NUM_NODES": "3",
            "SLURM_NODEID": "2",
            "SLURM_GPUS_PER_NODE": "gpu:h100:4",
        }
    )
    assert (alloc.main_address, alloc.node_rank, alloc.num_processes, alloc.port) == ("node1", 2, 12, 29500)
    # explicit values win; fewer processes than the node's GPUs is allowed
    alloc = slurm_allocation(_node(1), gpus_per_node=4, port=6000)
    assert (alloc.num_processes, alloc.port) == (8, 6000)
    # inside an srun step, the step's node list (node ids are relative to it) wins over the job's
    alloc = slurm_allocation(
        _node(
            0,
            SLURM_JOB_NODELIST="gpu-[07-09]",
            SLURM_NNODES="3",
            SLURM_STEP_NODELIST="gpu-[08-09]",
            SLURM_STEP_NUM_NODES="2",
            SLURM_STEP_TASKS_PER_NODE="1(x2)",
        )
    )
    assert alloc.nodes == ("gpu-08", "gpu-09") and alloc.num_processes == 16


@pytest.mark.parametrize(
    "env_, kwargs, message",
    [
        ({}, {}, r"SLURM_JOB_NODELIST / SLURM_NODELIST not set .*run inside a SLURM job"),
        ({k: v for k, v in _node(0).items() if k != "SLURM_NNODES"}, {}, r"SLURM_NNODES / SLURM_JOB_NUM_NODES not set"),
        ({k: v for k, v in _node(0).items() if k != "SLURM_NODEID"}, {}, r"SLURM_NODEID not set"),
        (_node(0, SLURM_JOB_NODELIST="gpu-[07-08"), {}, r"SLURM_JOB_NODELIST: .*unbalanced brackets"),
        (_node(0, SLURM_NNODES="3"), {}, r"'gpu-\[07-08\]' names 2 node\(s\) but SLURM_NNODES=3"),
        (_node(2), {}, r"SLURM_NODEID=2 is outside the allocation's 2 node\(s\)"),
        (_node(0, SLURM_NODEID="x"), {}, r"SLURM_NODEID='x': expected an integer"),
        (
            {**_node(0), "SLURM_GPUS_ON_NODE": "", "SLURM_GPUS_PER_NODE": ""},
            {},
            r"SLURM_GPUS_ON_NODE / SLURM_GPUS_PER_NODE not set .*--gpus-per-node",
        ),
        (_node(0, SLURM_GPUS_ON_NODE="4"), {}, r"SLURM_GPUS_ON_NODE=4 but SLURM_GPUS_PER_NODE=8"),
        (_node(0), {"gpus_per_node": 16}, r"--gpus-per-node 16 but SLURM gave this node 8 GPU\(s\)"),
        (_node(0), {"gpus_per_node": 0}, r"GPUs per node must be >= 1"),
        (_node(0, SLURM_GPUS="12"), {}, r"SLURM_GPUS=12 but 2 node\(s\) x 8 GPU\(s\) = 16 processes"),
        (_node(0, SLURM_GPUS_PER_NODE="h100:many"), {}, r"SLURM_GPUS_PER_NODE='h100:many': expected a GPU count"),
        (
            _node(0, SLURM_STEP_NODELIST="gpu-[07-08]", SLURM_STEP_TASKS_PER_NODE="8(x2)"),
            {},
            r"SLURM_STEP_TASKS_PER_NODE='8\(x2\)': run one task per node",
        ),
        (_node(0), {"port": 70000}, r"port 70000 is not a TCP port"),
    ],
)
def test_bad_slurm_environment_is_named(env_, kwargs, message):
    with pytest.raises(ConfigError, match=message):
        slurm_allocation(env_, **kwargs)


# ---------------------------------------------------------------------------------------------- command


def test_two_node_launch_command_is_exact():
    overrides = ["training_args.learning_rate=1e-5", "run_dir=/shared/runs/ml_sft"]
    for rank in (0, 1):
        cmd = launch_command(GPU_RECIPE, overrides, MULTINODE, slurm_allocation(_node(rank)), ["--no-progress"])
        assert cmd == _expected(rank, tail=(*overrides, "--no-progress"))
    # the recipe's own single-machine config serves N nodes too (the allocation overrides its topology)
    zero3 = launch_command(GPU_RECIPE, [], "configs/accelerate/zero3.yaml", slurm_allocation(_node(1)))
    assert zero3 == _expected(1, "configs/accelerate/zero3.yaml", "configs/deepspeed/zero3.json")
    ddp = launch_command(GPU_RECIPE, [], "configs/accelerate/ddp.yaml", slurm_allocation(_node(0)))
    assert ddp == _expected(0, "configs/accelerate/ddp.yaml", ds=None)


def test_launch_command_is_the_same_from_another_directory(tmp_path, monkeypatch):
    """Relative config paths resolve against the project root and are passed on absolute (accelerate would
    read the DeepSpeed JSON relative to the working directory)."""
    monkeypatch.chdir(tmp_path)
    assert launch_command(GPU_RECIPE, [], MULTINODE, slurm_allocation(_node(1))) == _expected(1)
    local = launch_command("r.yaml", ["a=1"], "configs/accelerate/cpu_zero3.yaml")
    assert local == [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--config_file",
        str(REPO / "configs/accelerate/cpu_zero3.yaml"),
        "--deepspeed_config_file",
        str(REPO / "configs/deepspeed/cpu_zero3.json"),
        "-m",
        "mlft",
        "train",
        "r.yaml",
        "a=1",
    ]


def _config(tmp_path, **changes) -> str:
    import yaml

    data = yaml.safe_load((REPO / MULTINODE).read_text())
    for key, value in changes.items():
        if key.startswith("ds_"):
            data["deepspeed_config"][key[3:]] = value
        else:
            data[key] = value
    path = tmp_path / "acc.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"rdzv_backend": "c10d"}, r"rdzv_backend 'c10d' with same_network: true gives torchrun no rendezvous"),
        ({"ds_deepspeed_multinode_launcher": "pdsh"}, r"deepspeed_multinode_launcher: 'pdsh' .* must be 'standard'"),
        ({"ds_deepspeed_config_file": "configs/deepspeed/nope.json"}, r"deepspeed_config_file not found"),
        ({"num_procs": 8}, r"unknown keys \(\['num_procs'\]\)"),
    ],
)
def test_config_that_cannot_run_on_several_nodes_is_refused(tmp_path, changes, message):
    with pytest.raises(ConfigError, match=message):
        launch_command(GPU_RECIPE, [], _config(tmp_path, **changes), slurm_allocation(_node(0)))


def test_single_process_config_is_refused_on_an_allocation():
    with pytest.raises(
        ConfigError,
        match=r"single.yaml runs one process .* 2 node\(s\) x 8 GPU\(s\): use "
        r"configs/accelerate/multinode_zero2.yaml",
    ):
        launch_command(GPU_RECIPE, [], "configs/accelerate/single.yaml", slurm_allocation(_node(0)))
    with pytest.raises(ConfigError, match="accelerate config not found: configs/accelerate/nope.yaml"):
        launch_command(GPU_RECIPE, [], "configs/accelerate/nope.yaml")


# ---------------------------------------------------------------------------------------------- CLI


def _cli(capsys, monkeypatch, environ: dict, *argv: str) -> tuple[int, str, str]:
    for key, value in environ.items():
        monkeypatch.setenv(key, value)
    code = main(["train", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_print_launch_renders_each_node(capsys, monkeypatch):
    for rank in (0, 1):
        code, out, _ = _cli(
            capsys,
            monkeypatch,
            _node(rank),
            GPU_RECIPE,
            "training_args.learning_rate=1e-5",
            "--launcher",
            "slurm",
            "--accelerate-config",
            MULTINODE,
            "--no-progress",
            "--print-launch",
        )
        assert code == 0
        assert shlex.split(out) == _expected(rank, tail=("training_args.learning_rate=1e-5", "--no-progress"))


def test_cli_launch_options(capsys, monkeypatch):
    # no --accelerate-config: the recipe's (zero2.yaml); --gpus-per-node / --main-process-port override SLURM
    code, out, _ = _cli(
        capsys,
        monkeypatch,
        _node(1),
        GPU_RECIPE,
        "--launcher",
        "slurm",
        "--gpus-per-node",
        "4",
        "--main-process-port",
        "6000",
        "--print-launch",
    )
    assert code == 0 and shlex.split(out)[3:15] == [
        "--config_file",
        str(REPO / "configs/accelerate/zero2.yaml"),
        "--num_machines",
        "2",
        "--num_processes",
        "8",
        "--machine_rank",
        "1",
        "--main_process_ip",
        "gpu-07",
        "--main_process_port",
        "6000",
    ]
    # the local launcher prints this machine's command; a recipe without accelerate_config trains in-process
    code, out, _ = _cli(capsys, monkeypatch, {}, GPU_RECIPE, "--print-launch")
    assert code == 0 and shlex.split(out)[:5] == [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--config_file",
        str(REPO / "configs/accelerate/zero2.yaml"),
    ]
    assert "--num_machines" not in out
    code, out, _ = _cli(capsys, monkeypatch, {}, GPU_RECIPE, "accelerate_config=null", "--print-launch")
    assert code == 0 and "trains in this process" in out


@pytest.mark.parametrize(
    "environ, argv, message",
    [
        ({}, ["--launcher", "slurm"], "SLURM_JOB_NODELIST / SLURM_NODELIST not set"),
        (_node(0), ["--launcher", "slurm", "--no-launch"], "cannot be combined with --no-launch"),
        (_node(0, LOCAL_RANK="0"), ["--launcher", "slurm"], "inside an already launched process"),
        (_node(0), ["accelerate_config=null", "--launcher", "slurm"], "the recipe has no accelerate_config"),
        (_node(0), ["--gpus-per-node", "8"], "are for --launcher slurm"),
        (_node(0, SLURM_NNODES="3"), ["--launcher", "slurm"], "names 2 node"),
    ],
)
def test_cli_errors(capsys, monkeypatch, environ, argv, message):
    code, out, err = _cli(capsys, monkeypatch, environ, GPU_RECIPE, *argv, "--print-launch")
    assert code == 2 and message in err and out == ""


# ---------------------------------------------------------------------------------------------- configs


def test_every_shipped_accelerate_config_loads_with_accelerate():
    from accelerate.commands.launch import launch_command_parser

    options = {a.dest for a in launch_command_parser()._actions}
    names = {p.name for p in CONFIGS}
    assert {"multinode_zero2.yaml", "multinode_zero3.yaml", "zero2.yaml", "cpu_ddp.yaml"} <= names
    for path in CONFIGS:
        config = read_accelerate_config(path)  # accelerate's loader: unknown top-level keys are errors
        for key in config.deepspeed_config:  # nested keys become `accelerate launch --KEY` options
            assert key in options, f"{path.name}: deepspeed_config.{key} is not an accelerate launch option"
        if config.deepspeed_config:
            assert (REPO / config.deepspeed_config["deepspeed_config_file"]).is_file()
            assert config.deepspeed_config["deepspeed_multinode_launcher"] == "standard"
        assert config.rdzv_backend == "static" and config.same_network
        if path.name.startswith("multinode_"):
            assert config.num_machines == 2 and config.num_processes == 16 and not config.use_cpu


def test_gpu_recipes_render_on_a_two_node_allocation():
    """Every shipped GPU recipe's own accelerate_config runs on 2 x 8 GPUs (checked, not launched)."""
    from mlft.training.recipe import load_recipe

    for path in sorted((REPO / "recipes").glob("[!_]*.yaml")):
        recipe = load_recipe(path, ["model=smollm2-135m-instruct"] if "dpo" in path.stem else [])
        cmd = launch_command(str(path), [], recipe.accelerate_config, slurm_allocation(_node(1)))
        assert cmd[cmd.index("--num_processes") + 1] == "16"


# ---------------------------------------------------------------------------------------------- sbatch


def _fake_slurm_bin(tmp_path: Path) -> Path:
    """`srun` and `python` stand-ins that record their argv (one JSON line each) instead of running."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("srun", "python"):
        exe = bin_dir / name
        exe.write_text(
            f"#!{sys.executable}\nimport json, os, sys\n"
            f"with open(os.environ['FAKE_LOG'], 'a') as f:\n"
            f"    f.write(json.dumps([{name!r}, os.getcwd(), os.environ.get('SRUN_CPUS_PER_TASK'),"
            f" *sys.argv[1:]]) + '\\n')\n"
        )
        exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return bin_dir


def test_sbatch_script_is_valid_bash_and_requests_one_task_per_node():
    subprocess.run(["bash", "-n", str(SBATCH)], check=True)
    text = SBATCH.read_text()
    assert text.startswith("#!/bin/bash\n")
    for line in ("#SBATCH --ntasks-per-node=1", "#SBATCH --gpus-per-node=8", "#SBATCH --nodes=2"):
        assert line in text.splitlines()
    assert '-m mlft train "$@" --launcher slurm' in text
    assert os.access(SBATCH, os.X_OK)


def test_sbatch_script_runs_one_launcher_per_node_rendering_the_tested_command(tmp_path, capsys, monkeypatch):
    """Run slurm/train.sbatch as sbatch would (job env, fake srun/python): it validates once (--print-launch),
    then srun runs `mlft train ... --launcher slurm` once per node; each node renders the exact command."""
    log = tmp_path / "calls.jsonl"
    job_env = {
        **os.environ,
        **JOB,
        "SLURM_NODEID": "0",
        "SLURM_SUBMIT_DIR": str(REPO),
        "SLURM_CPUS_ON_NODE": "96",
        "PATH": f"{_fake_slurm_bin(tmp_path)}:{os.environ['PATH']}",
        "FAKE_LOG": str(log),
    }
    proc = subprocess.run(
        ["bash", str(SBATCH), GPU_RECIPE, "training_args.learning_rate=1e-5", "--no-progress"],
        cwd=tmp_path,
        env={**job_env, "MLFT_ACCELERATE_CONFIG": MULTINODE},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    (check, srun) = [json.loads(line) for line in log.read_text().splitlines()]
    node_argv = [
        "-m",
        "mlft",
        "train",
        GPU_RECIPE,
        "training_args.learning_rate=1e-5",
        "--no-progress",
        "--launcher",
        "slurm",
        "--accelerate-config",
        MULTINODE,
    ]
    assert check == ["python", str(REPO), None, *node_argv, "--print-launch"]
    assert srun == [
        "srun",
        str(REPO),
        "96",
        "--nodes=2",
        "--ntasks-per-node=1",
        "--kill-on-bad-exit=1",
        "python",
        *node_argv,
    ]
    for rank in (0, 1):  # what each node's task renders (in this process instead of exec)
        code, out, _ = _cli(capsys, monkeypatch, _node(rank), *srun[10:], "--print-launch")
        assert code == 0
        assert shlex.split(out) == _expected(rank, tail=("training_args.learning_rate=1e-5", "--no-progress"))
    # usage errors before anything is submitted to the nodes
    bad = subprocess.run(["bash", str(SBATCH)], cwd=tmp_path, env=job_env, capture_output=True, text=True)
    assert bad.returncode == 2 and "usage: sbatch" in bad.stderr
    assert len(log.read_text().splitlines()) == 2  # nothing more ran


# ---------------------------------------------------------------------------------------------- real launch


@pytest.mark.multiprocess  # two launched nodes
@pytest.mark.slow
def test_two_fake_nodes_train_through_the_slurm_launcher(shared, tmp_path, tiny):
    """Two `mlft train --launcher slurm` tasks (SLURM_NODEID 0 and 1 of 'localhost,localhost', 1 process per
    node) started from another working directory: two accelerate launchers meet at the rendered address and
    train one 2-process DDP run (CPU, gloo), of the two-layer model (`tiny`: the launch is what is tested)."""
    run_dir = tmp_path / "run"
    argv = [
        sys.executable,
        "-m",
        "mlft",
        "train",
        str(REPO / "recipes/cpu/multilingual_sft.yaml"),
        "training_args.max_steps=1",
        "training_args.save_steps=1",
        "training_args.per_device_train_batch_size=2",
        "training_args.max_length=64",
        "evaluation.enabled=false",
        "mix_overrides=[total=8]",
        f"run_dir={run_dir}",
        f"model={tiny}",
        "--no-progress",
        "--launcher",
        "slurm",
        "--gpus-per-node",
        "1",
        "--accelerate-config",
        "configs/accelerate/cpu_ddp.yaml",
    ]
    node_env = {
        **env(shared),
        "PYTHONPATH": str(REPO),
        "SLURM_JOB_ID": str(os.getpid()),
        "SLURM_JOB_NODELIST": "localhost,localhost",
        "SLURM_NNODES": "2",
    }
    procs = [
        subprocess.Popen(
            argv,
            cwd=tmp_path,
            env={**node_env, "SLURM_NODEID": str(rank)},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        for rank in (0, 1)
    ]
    outs = []
    try:
        for p in procs:
            outs.append(p.communicate(timeout=300)[0])
    except subprocess.TimeoutExpired:
        raise AssertionError("2-node launch hung for 300 s") from None
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, 9)
                p.wait()
    for rank, (p, out) in enumerate(zip(procs, outs)):
        assert p.returncode == 0, out[-3000:]
        assert f"--num_machines 2 --num_processes 2 --machine_rank {rank} --main_process_ip localhost" in out
    marker = json.loads((run_dir / "complete").read_text())
    assert marker["world_size"] == 2 and marker["global_step"] == 1
    # a LoRA run on a local model: its adapter in final_adapter/, the merged weights in final/
    assert (run_dir / "final_adapter" / "adapter_config.json").is_file() and (run_dir / "final").is_dir()
