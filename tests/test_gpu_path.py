"""The GPU path, caught on a CPU: device choice under a mocked `torch.cuda`, the separate-process evaluation's
command and environment, the process-group timeout, global batch size, activation-checkpointing kwargs under
trl's PEFT + ZeRO-3 rewrite, device/dtype in the resume guard, and the run's chat template for a base model.
(The 2-process runs that exercise these for real are in test_training_runs.py.)"""

from __future__ import annotations

import subprocess

import pytest
import torch

from mlft.errors import ConfigError
from mlft.generation import models
from mlft.training import callback as cb
from mlft.training import train as tr
from mlft.training.recipe import accumulation_steps, load_recipe
from tests.training_helpers import templateless_base

CPU_SFT = "recipes/cpu/multilingual_sft.yaml"


@pytest.fixture
def fake_cuda(monkeypatch):
    """torch.cuda says there are 2 GPUs (nothing is allocated on them)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)


def test_default_device_is_the_ranks_gpu(monkeypatch, fake_cuda):
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    assert models.default_device() == "cuda"
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert models.default_device() == "cuda:1"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert models.default_device() == "cpu"


def test_load_places_the_model_on_the_default_device(monkeypatch):
    """`mlft eval/generate --model X` (no --device) generates where default_device() says. The meta
    device stands in for a GPU: the weights really move there."""
    monkeypatch.setattr(models, "default_device", lambda: "meta")
    model, _ = models.load(None, dtype="float32")
    assert {p.device.type for p in model.parameters()} == {"meta"}
    model, _ = models.load(None, dtype="float32", device="cpu")
    assert {p.device.type for p in model.parameters()} == {"cpu"}


def test_separate_process_evaluation_gets_the_gpu_dtype_and_threads(monkeypatch, tmp_path, fake_cuda):
    """The ZeRO-3/FSDP child evaluation runs on the rank's GPU, not on the CPU with torchrun's OMP_NUM_THREADS=1."""
    recipe = load_recipe(
        CPU_SFT, [f"run_dir={tmp_path}", "dtype=auto", "training_args.bf16=true", "training_args.use_cpu=false"]
    )
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "8")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.delenv("MLFT_EVAL_THREADS", raising=False)
    monkeypatch.setattr(cb.os, "cpu_count", lambda: 64)
    seen = {}

    def fake_run(cmd, env, timeout):
        seen.update(cmd=cmd, env=env, timeout=timeout)
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(cb.subprocess, "run", fake_run)
    callback = cb.EvalCallback(recipe, tmp_path, tokenizer=None, in_process=False, progress=False)
    callback._evaluate_in_child(3, str(tmp_path / "checkpoints" / "checkpoint-3"), is_end=False)
    cmd = seen["cmd"]
    assert cmd[cmd.index("--device") + 1] == "cuda:0"  # LOCAL_RANK 0: its GPU
    assert cmd[cmd.index("--dtype") + 1] == "bfloat16"  # the training dtype of a bf16 run
    assert seen["env"]["OMP_NUM_THREADS"] == "8"  # 64 cores / 8 ranks on the node, not torchrun's 1
    assert "RANK" not in seen["env"] and "LOCAL_RANK" not in seen["env"]
    assert seen["timeout"] == recipe.evaluation.timeout_s
    monkeypatch.setenv("MLFT_EVAL_THREADS", "3")
    assert cb.child_env()["OMP_NUM_THREADS"] == "3"
    # a model that trains on GPU 1: its checkpoint is evaluated on GPU 1
    fake = torch.nn.Linear(1, 1, device="meta")
    monkeypatch.setattr(type(next(fake.parameters())), "device", property(lambda self: torch.device("cuda", 1)))
    assert cb.eval_placement(recipe, fake) == {"device": "cuda:1", "dtype": "bfloat16"}


def test_no_gpu_means_cpu_evaluation(monkeypatch, tmp_path):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    recipe = load_recipe(CPU_SFT, [f"run_dir={tmp_path}"])
    assert cb.eval_placement(recipe) == {"device": "cpu", "dtype": "float32"}


def test_process_group_timeout_exceeds_the_evaluation(tmp_path):
    """The group's timeout is the recipe's ddp_timeout raised above evaluation.timeout_s (and the trl
    config agrees, so the GPU/DeepSpeed paths of transformers, which pass ddp_timeout on, get it too)."""
    recipe = load_recipe(CPU_SFT, [f"run_dir={tmp_path}", "training_args.ddp_timeout=5", "evaluation.timeout_s=60"])
    assert tr.process_group_timeout(recipe) == 60 + tr.PG_TIMEOUT_MARGIN_S
    assert tr._trainer_config(recipe, tmp_path).ddp_timeout == 660
    recipe = load_recipe(CPU_SFT, [f"run_dir={tmp_path}", "training_args.ddp_timeout=7200"])
    assert tr.process_group_timeout(recipe) == 7200
    recipe = load_recipe(CPU_SFT, [f"run_dir={tmp_path}", "training_args.ddp_timeout=5", "evaluation.enabled=false"])
    assert tr.process_group_timeout(recipe) == 5
    assert tr.process_group_timeout(load_recipe(CPU_SFT, [f"run_dir={tmp_path}", "evaluation.enabled=false"])) == 1800


def test_global_batch_size_derives_accumulation(tmp_path):
    base = [f"run_dir={tmp_path}", "global_batch_size=16", "training_args.per_device_train_batch_size=2"]
    recipe = load_recipe(CPU_SFT, base)
    assert [accumulation_steps(recipe, w) for w in (1, 2, 4, 8)] == [8, 4, 2, 1]
    assert tr._trainer_config(recipe, tmp_path, world_size=2).gradient_accumulation_steps == 4
    with pytest.raises(ConfigError, match=r"not a multiple of per_device_train_batch_size \(2\) x world size \(3\)"):
        accumulation_steps(recipe, 3)
    with pytest.raises(ConfigError, match="both set"):
        load_recipe(CPU_SFT, [*base, "training_args.gradient_accumulation_steps=2"])
    with pytest.raises(ConfigError, match=r"world size \(2\) = 8"):  # checked against the launch config up front
        load_recipe(
            CPU_SFT,
            [
                f"run_dir={tmp_path}",
                "global_batch_size=12",
                "training_args.per_device_train_batch_size=4",
                "accelerate_config=configs/accelerate/cpu_ddp.yaml",
            ],
        )


def _trl_peft_zero3_rewrite(args) -> None:
    """What trl 1.16's SFTTrainer does to the config for PEFT + DeepSpeed ZeRO-3 + gradient checkpointing."""
    args.gradient_checkpointing_kwargs = args.gradient_checkpointing_kwargs or {}
    args.gradient_checkpointing_kwargs["use_reentrant"] = True


def test_trl_reentrant_setting_reaches_transformers(tmp_path):
    """Confirmed on the installed libraries: trl writes `use_reentrant` into the deprecated name, which
    transformers no longer reads; mlft's config shares one dict under both names."""
    from trl import SFTConfig

    plain = SFTConfig(output_dir=str(tmp_path), activation_checkpointing=True, use_cpu=True)
    _trl_peft_zero3_rewrite(plain)
    assert not (plain.activation_checkpointing_kwargs or {}).get("use_reentrant")  # lost: the bug
    recipe = load_recipe(CPU_SFT, [f"run_dir={tmp_path}", "training_args.activation_checkpointing=true"])
    config = tr._trainer_config(recipe, tmp_path)
    _trl_peft_zero3_rewrite(config)
    assert config.activation_checkpointing_kwargs["use_reentrant"] is True
    user = load_recipe(
        CPU_SFT,
        [
            f"run_dir={tmp_path}",
            "training_args.activation_checkpointing=true",
            "training_args.activation_checkpointing_kwargs={use_reentrant: true}",
        ],
    )
    assert tr._trainer_config(user, tmp_path).activation_checkpointing_kwargs == {"use_reentrant": True}


def test_resume_refuses_completions_from_another_device_or_dtype(tmp_path):
    """A resumed evaluation cannot mix fp32-CPU and bf16-GPU completions."""
    from mlft.generation.decoding import Decoding
    from mlft.generation.prompting import Prompting
    from mlft.generation.runner import _check_resumable, settings_of

    cpu = settings_of("m", "hf", Decoding(), Prompting(), placement={"device": "cpu", "dtype": "float32"})
    gpu = settings_of("m", "hf", Decoding(), Prompting(), placement={"device": "cuda", "dtype": "bfloat16"})
    assert (cpu["device"], cpu["dtype"]) == ("cpu", "float32")
    _check_resumable(tmp_path / "c.jsonl", [dict(cpu, id="1")], cpu)
    with pytest.raises(ConfigError, match=r"device, dtype: \['cpu', 'float32'\] vs now \['cuda', 'bfloat16'\]"):
        _check_resumable(tmp_path / "c.jsonl", [dict(cpu, id="1")], gpu)
    legacy = {k: v for k, v in cpu.items() if k not in ("device", "dtype")}  # files from before the fields
    _check_resumable(tmp_path / "c.jsonl", [dict(legacy, id="1")], cpu)


def test_completions_record_device_and_dtype(tmp_path, embedded_model):
    from mlft.generation.backends.hf import HFBackend

    model, tok = embedded_model
    assert HFBackend(model, tok).placement == {"device": "cpu", "dtype": "float32"}


def test_each_planned_batch_generates_alone_as_in_the_whole_call(embedded_model):
    """Data-parallel evaluation hands the hf backend's batches to different ranks: generated alone, each batch
    must give what the whole call gives (sampling seeds per batch, prefix cache per batch)."""
    from mlft.generation.backends.hf import HFBackend
    from mlft.generation.decoding import Decoding
    from mlft.generation.requests import Request

    model, tok = embedded_model
    backend = HFBackend(model, tok, batch_size=16, max_batch_tokens=200)
    texts = [
        "Write a short poem about the sea in German.",
        "Hi",
        "Explain quantum physics to a child, in French please, with examples.",
        "Was ist das?",
        "Tell me a joke",
        "How are you today my friend?",
        "Bonjour",
    ]
    reqs = [Request(str(i), messages=[{"role": "user", "content": x}], language="de") for i, x in enumerate(texts)]
    decoding = Decoding(max_new_tokens=8, seed=3, temperature=0.7, top_p=0.9)
    plan = backend.plan(reqs, decoding)
    assert len(plan) > 1 and sorted(r.id for batch in plan for r in batch) == sorted(r.id for r in reqs)
    whole = {r.id: r.completion for r in backend.generate(reqs, decoding)}
    alone = {r.id: r.completion for batch in reversed(plan) for r in backend.generate(batch, decoding)}
    assert whole == alone


def test_base_model_without_template_gets_the_runs_template(tmp_path, embedded_model):
    """The step-0 child loads the hub base model, whose tokenizer has no chat template."""
    from mlft.training.passes import backend_settings

    model, tok = embedded_model
    base = templateless_base(tmp_path / "base", model, tok)
    _, bare = models.load(str(base), device="cpu")
    assert not bare.chat_template
    run = tmp_path / "run"
    run.mkdir()
    assert backend_settings(run, "hf", {}) == {}
    (run / tr.CHAT_TEMPLATE).write_text(
        "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{% endfor %}"
        "{% if add_generation_prompt %}<assistant>{% endif %}"
    )
    opts = backend_settings(run, "hf", {"device": "cpu"})
    assert opts == {"chat_template": str(run / tr.CHAT_TEMPLATE), "device": "cpu"}
    _, templated = models.load(str(base), device="cpu", chat_template=opts["chat_template"])
    text = templated.apply_chat_template(
        [{"role": "user", "content": "Hallo"}], add_generation_prompt=True, tokenize=False
    )
    assert text == "<user>Hallo<assistant>"
    _, own = models.load(None, device="cpu", chat_template=opts["chat_template"])  # its own template wins
    assert own.chat_template == tok.chat_template
    with pytest.raises(Exception, match="chat_template: cannot read"):
        models.load(str(base), device="cpu", chat_template=str(tmp_path / "missing.jinja"))


BARRIER = """
import datetime, os, sys, time
import torch.distributed as dist
rank, port, timeout_s, sleep_s, out = int(sys.argv[1]), sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2,
                        timeout=datetime.timedelta(seconds=timeout_s))
if rank == 0:
    time.sleep(sleep_s)  # "evaluating"
try:
    dist.barrier()
    result = "ok"
except Exception as exc:
    result = type(exc).__name__
open(os.path.join(out, f"rank{rank}"), "w").write(result)
"""


@pytest.mark.serial  # two ranks, timed
@pytest.mark.slow
def test_a_waiting_rank_dies_when_the_evaluation_outlasts_the_group_timeout(tmp_path):
    """Why the timeout must be raised: a rank waiting at a gloo barrier longer than the group's timeout (2 s while
    rank 0 "evaluates" for 6 s) fails; NCCL's watchdog kills a GPU job the same way."""
    import socket
    import sys

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    script = tmp_path / "barrier.py"
    script.write_text(BARRIER)
    procs = [
        subprocess.Popen([sys.executable, str(script), str(r), str(port), "2", "6", str(tmp_path)]) for r in (0, 1)
    ]
    for proc in procs:
        proc.wait(timeout=120)
    assert (tmp_path / "rank1").read_text() in ("RuntimeError", "DistBackendError")


def _lora(model, checkpointing: bool = True):
    """A trainable LoRA model on a copy of `model` (q and v projections), in train mode, checkpointing on."""
    import copy

    from peft import LoraConfig, get_peft_model

    train_copy = copy.deepcopy(model)
    if checkpointing:
        train_copy.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    torch.manual_seed(0)
    peft = get_peft_model(train_copy, LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False))
    peft.train()
    return peft


def _checkpointing(model) -> bool:
    return any(getattr(m, "gradient_checkpointing", False) is True for m in model.modules())


def test_lora_eval_of_a_checkpointed_model_keeps_its_kv_cache(embedded_model):
    """Found on the H100: LoRA + activation checkpointing, the merged evaluation copy kept checkpointing on, so
    transformers forced use_cache off, the prefix KV cache was None and every in-process pass failed. Now the live
    model is evaluated (no copy): checkpointing off and the cache on for the pass, both as training had them after."""
    from mlft.generation.backends.hf import HFBackend
    from mlft.generation.decoding import Decoding
    from mlft.generation.models import eval_mode
    from mlft.generation.requests import Request

    model, tok = embedded_model
    peft = _lora(model)
    peft.config.use_cache = False  # as a training run with checkpointing sets it
    assert _checkpointing(peft)
    reqs = [Request(str(i), messages=[{"role": "user", "content": t}]) for i, t in enumerate(["Hallo!", "Salut!"])]
    with eval_mode(peft) as live:
        assert live is peft and not live.training and not _checkpointing(live) and live.config.use_cache
        backend = HFBackend(live, tok)
        results = list(backend.generate(reqs, Decoding(max_new_tokens=4)))
        assert backend._prefix is not None and backend._prefix[1] is not None
    assert all(r.error is None and r.completion_tokens > 0 for r in results)
    assert peft.training and _checkpointing(peft) and peft.config.use_cache is False  # training's settings back


def test_lora_eval_holds_no_second_copy_of_the_weights():
    """A 7B geometry (Qwen2.5-7B: 28 layers, hidden 3,584, vocabulary 152k; bf16) on the meta device, LoRA on q and
    v: the tensors alive during an evaluation pass hold the live model's bytes, not twice them. Before: a merged
    deep copy per pass, 14.2 GiB more (an OOM on a GPU that trains the model)."""
    import gc

    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    from mlft.generation.models import eval_mode

    config = LlamaConfig(
        vocab_size=152064,
        hidden_size=3584,
        intermediate_size=18944,
        num_hidden_layers=28,
        num_attention_heads=28,
        num_key_value_heads=4,
    )
    with torch.device("meta"):
        base = LlamaForCausalLM(config).to(torch.bfloat16)
    peft = get_peft_model(base, LoraConfig(r=16, target_modules=["q_proj", "v_proj"]))
    peft.train()

    def meta_bytes() -> int:  # every meta tensor alive (no storage: nbytes is what a device would hold)
        gc.collect()
        tensors = {id(o): o for o in gc.get_objects() if type(o) in (torch.Tensor, torch.nn.Parameter) and o.is_meta}
        return sum(t.nbytes for t in tensors.values())

    before = meta_bytes()
    assert before > 14 * 2**30
    with eval_mode(peft) as live:
        during, same = meta_bytes(), live is peft
    print(
        f"\nLoRA evaluation of a 7B geometry: {before / 2**30:.2f} GiB of tensors before, {during / 2**30:.2f} during"
    )
    assert during <= before + 2**20
    assert same  # the live model itself, adapters unmerged


def test_training_after_a_lora_eval_is_bit_identical_to_training_without(embedded_model):
    """Two copies of one LoRA model (checkpointing on) take a training step; one is evaluated (greedy and sampled
    generation through the hf backend), then both take another step: the losses and every weight (base and adapter)
    are bit-identical. No weight is written during the pass (a merge in place and unmerge after is not exact)."""
    import copy

    from mlft.generation.backends.hf import HFBackend
    from mlft.generation.decoding import Decoding
    from mlft.generation.models import eval_mode
    from mlft.generation.requests import Request

    model, tok = embedded_model
    runs = [_lora(model)]
    runs.append(copy.deepcopy(runs[0]))
    batch = tok(["Der Hund schläft im Garten.", "Le chat dort sur le lit."], return_tensors="pt", padding=True)
    labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    reqs = [Request(str(i), messages=[{"role": "user", "content": t}]) for i, t in enumerate(["Hallo!", "Salut!"])]
    losses = []
    for k, peft in enumerate(runs):
        opt = torch.optim.AdamW([p for p in peft.parameters() if p.requires_grad], lr=1e-2)

        def step(peft=peft, opt=opt) -> float:
            loss = peft(**batch, labels=labels).loss
            loss.backward()
            opt.step()
            opt.zero_grad()
            return loss.item()

        run = [step()]
        if k == 0:
            with eval_mode(peft) as live:
                backend = HFBackend(live, tok, batch_size=2)
                for decoding in (Decoding(max_new_tokens=4, temperature=0.0), Decoding(max_new_tokens=4, seed=1)):
                    assert all(r.error is None for r in backend.generate(reqs, decoding))
            assert peft.training and _checkpointing(peft)
        run.append(step())
        losses.append(run)
    assert losses[0] == losses[1]
    weights = [dict(peft.named_parameters()) for peft in runs]
    assert weights[0].keys() == weights[1].keys() and any("lora_A" in n for n in weights[0])
    assert all(torch.equal(weights[0][n], weights[1][n]) for n in weights[0])


@pytest.mark.slow  # measured over 40 s on the loaded machine (docs/results/test_times.json)
def test_compiled_decoding_of_an_unmerged_lora_decodes_as_eager_across_training_steps():
    """The live LoRA model (adapters unmerged) through compiled decoding, as the callback evaluates it: greedy
    replies equal eager's in a pass, a training step, and the next pass (a new backend, as each pass builds one):
    equal again to eager's, which changed with the weights, and no graph compiled anew."""
    import torch._dynamo
    from peft import LoraConfig, get_peft_model
    from torch._dynamo.utils import counters

    from mlft.generation.backends.hf import HFBackend
    from mlft.generation.decoding import Decoding
    from mlft.generation.models import eval_mode
    from tests.device_helpers import requests, tiny_model

    model, tok = tiny_model()
    torch.manual_seed(0)
    peft = get_peft_model(model, LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False))
    peft.train()
    opt = torch.optim.AdamW([p for p in peft.parameters() if p.requires_grad], lr=0.1)
    batch = tok(["Der Hund schläft im Garten."], return_tensors="pt")
    reqs, decoding = requests(8), Decoding(temperature=0.0, max_new_tokens=6)
    torch._dynamo.reset()
    counters.clear()
    passes = []
    try:
        for _ in range(2):
            with eval_mode(peft) as live:
                eager = {
                    r.id: r.completion
                    for r in HFBackend(live, tok, batch_size=8, decode="eager").generate(reqs, decoding)
                }
                compiled = HFBackend(live, tok, batch_size=8, decode="compiled")
                passes.append((eager, {r.id: r.completion for r in compiled.generate(reqs, decoding)}))
                graphs = counters["stats"]["unique_graphs"]
            peft(**batch, labels=batch["input_ids"]).loss.backward()
            opt.step()
            opt.zero_grad()
    finally:
        torch._dynamo.reset()
    assert all(eager == got for eager, got in passes)
    assert passes[0][0] != passes[1][0]  # the training step changed the replies
    assert graphs == 1  # the second pass reused the first pass's graph
