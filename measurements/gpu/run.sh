#!/usr/bin/env bash
# GPU measurement of mlft, one command on any CUDA machine:
#
#   measurements/gpu/run.sh [train] [generate] [rows] [lcb] [zero3] [ratio] [all]
#                                         (default: all = train generate rows lcb zero3 ratio, within the budget)
#
#   train     `mlft train` on the GPU recipe shape (recipes/multilingual_sft.yaml: bf16, full fine-tune,
#             assistant-only loss, batch 8 x 4, max_length 2048; ZeRO-2 through accelerate + DeepSpeed when the
#             deepspeed wheel works, else one plain GPU process) on a random-weight SmolLM2-1.7B-shape model,
#             30 steps, eval callback (lcb_demo without ja) at the end; then LoRA; then packing (padding-free).
#             Reports tokens/s, MFU, peak memory, the callback's share of wall time.
#   generate  hf backend, the paper's decoding, 100 new tokens: tokens/s at batch 16 / 64 / 256 and the time of a
#             full-LCB pass (6,586 prompts), estimated from a random sample.
#   ratio     `mlft train` vs plain trl (SFTTrainer with the config mlft builds, the same rows), one process, 8 steps:
#             median s/step of each, written per step as it finishes, and their ratio (measurements/train_speed.py).
#   rows      training rows of realistic lengths (measurements/gpu/lengths.py): `lcb` (LCB prompt + released
#             reply lengths, .gpu_assets/lcb_lengths.json) and `ultrachat` (lognormal, median 1,000, tail to 8k),
#             exact token lengths cut from the seed text; mlft then plain trl on the same config and rows, 8 steps of
#             32 rows each: tokens/s, s/step (each step written as it finishes), the mlft/trl ratio.
#   lcb       the full LCB pass (6,586 prompts x 100 new tokens) with hf, then vllm (skipped, with the
#             reason, when vllm is not installed): wall time, generate calls, new tokens/s; each time-boxed.
#   zero3     1-GPU ZeRO-3 run whose callback evaluates the saved checkpoint (and step 0) in a separate process:
#             does it complete, and on which device did the child run.
#
# Every stage is time-boxed and the next one runs even if one fails; the whole invocation stays inside
# $MLFT_GPU_BENCH_BUDGET_S (default 570 s: the device tool allows 600 s per command). Output under $OUT
# (default /tmp/mlft_gpu_bench/out): results.json, summary.txt, setup.log, train.log, generate.log, rows.log, lcb.log, zero3.log,
# ratio.log.
#
# Needs (ignored folders, carried to the GPU machine; made by measurements/gpu/prepare.sh): .whl/ (wheels the GPU
# image lacks) and .gpu_assets/ (tokenizer/, lcb/). No model weights travel: the model is built from its config.
# MLFT_GPU_BENCH_TINY=1: a CPU smoke run of the same code at toy scale (2-layer model, 3 steps, a few prompts).
set -u
cd "$(dirname "$0")/../.." || exit 2
ROOT=$PWD
export MLFT_GPU_BENCH_WORK=${MLFT_GPU_BENCH_WORK:-/tmp/mlft_gpu_bench}
export OUT=${OUT:-$MLFT_GPU_BENCH_WORK/out}
BUDGET=${MLFT_GPU_BENCH_BUDGET_S:-570}
TINY=${MLFT_GPU_BENCH_TINY:-0}
mkdir -p "$OUT" "$MLFT_GPU_BENCH_WORK"

stages=()
for s in "${@:-all}"; do
  case $s in
    all) stages+=(train generate rows lcb zero3 ratio) ;;
    train|generate|rows|lcb|zero3|ratio) stages+=("$s") ;;
    *) echo "usage: $0 [train] [generate] [rows] [lcb] [zero3] [ratio] [all]" >&2; exit 2 ;;
  esac
done

# ---- environment: carried wheels, offline hub, data, the probe that records each process's device
if [ "$TINY" != 1 ] && ls .whl/*.whl >/dev/null 2>&1; then
  if [ ! -f /tmp/site/.mlft_wheels_ok ]; then
    t=$SECONDS
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
      .whl/*.whl >>"$OUT/setup.log" 2>&1
    rc=$?
    [ $rc -eq 0 ] && touch /tmp/site/.mlft_wheels_ok
    echo "wheels: $(ls .whl/*.whl | wc -l) installed into /tmp/site in $((SECONDS - t)) s (rc $rc)" | tee -a "$OUT/setup.log"
  fi
  export PYTHONPATH=$ROOT/measurements/gpu/probe:/tmp/site:$ROOT
else
  export PYTHONPATH=$ROOT/measurements/gpu/probe:$ROOT${PYTHONPATH:+:$PYTHONPATH}
fi
[ -d .gpu_assets/lcb ] && export MLFT_LCB_DATA=$ROOT/.gpu_assets/lcb
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
export MLFT_BENCH_PROBE=$MLFT_GPU_BENCH_WORK/probe.jsonl
[ "$TINY" = 1 ] && export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} CUDA_VISIBLE_DEVICES=""
PY=python3

# run_stage LOG LIMIT_S ARGS...: bench.py ARGS with at most LIMIT_S seconds (less if the budget is nearly spent)
run_stage() {
  local log=$1 limit=$2; shift 2
  local left=$((BUDGET - SECONDS - 20))
  if [ "$left" -lt 45 ]; then
    echo "[$(date +%T)] SKIPPED $* (budget: ${left} s left)" | tee -a "$OUT/$log"
    return 0
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  local t=$SECONDS rc
  echo "[$(date +%T)] === $* (limit ${limit} s)" >>"$OUT/$log"
  MLFT_GPU_BENCH_STAGE_S=$((limit - 25)) timeout -k 10 "$limit" $PY measurements/gpu/bench.py "$@" >>"$OUT/$log" 2>&1
  rc=$?
  echo "[$(date +%T)] $* -> rc $rc in $((SECONDS - t)) s" | tee -a "$OUT/$log"
  [ $rc -ne 0 ] && tail -n 15 "$OUT/$log" | sed 's/^/    | /'
  return 0
}

run_stage setup.log 90 env
[ -f "$MLFT_GPU_BENCH_WORK/model/config.json" ] || run_stage setup.log 150 model
for s in "${stages[@]}"; do
  case $s in
    train)
      run_stage train.log 200 train full
      run_stage train.log 160 train lora
      run_stage train.log 160 train packed ;;
    generate) run_stage generate.log 200 generate ;;
    rows)
      run_stage rows.log 240 rows lcb
      run_stage rows.log 300 rows ultrachat ;;
    lcb)
      run_stage lcb.log 420 lcb hf
      run_stage lcb.log 420 lcb vllm ;;
    zero3) run_stage zero3.log 280 train zero3 ;;
    ratio)  # `mlft train` vs plain trl on the same config, one process, s/step in one run (measurements/train_speed.py)
      t=$SECONDS
      timeout -k 10 240 $PY measurements/train_speed.py recipes/multilingual_sft.yaml --steps 8 \
        --work "$MLFT_GPU_BENCH_WORK/ratio" -o "model=$MLFT_GPU_BENCH_WORK/model" \
        -o mix=data_mixes/cpu/multilingual_sft.yaml -o mix_overrides=[total=600] -o global_batch_size=8 \
        -o accelerate_config=null >>"$OUT/ratio.log" 2>&1
      echo "ratio -> rc $? in $((SECONDS - t)) s: $(tail -n 1 "$OUT/ratio.log")" | tee -a "$OUT/ratio.log" ;;
  esac
done
$PY measurements/gpu/bench.py summary
echo "total ${SECONDS} s; files in $OUT: $(ls "$OUT" | tr '\n' ' ')"
