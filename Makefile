# Quick start: `make demo` (the default benchmark, printing a table) and `make test`.
# Both create .venv with pip on first use.
PYTHON ?= python3
# torch: the small CPU build where no GPU is present, else whatever `torch>=2.8` resolves to.
TORCH_CPU ?= torch==2.13.0
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# optional extras to install with the package (CI adds ray: make test EXTRAS=test,ray)
EXTRAS ?= test

.PHONY: demo test bench-speed clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	if ! command -v nvidia-smi >/dev/null 2>&1; then $(PY) -m pip install --quiet "$(TORCH_CPU)"; fi
	$(PY) -m pip install --quiet -e ".[$(EXTRAS)]"
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m benchmarks default

test: $(STAMP)
	$(PY) -m pytest -q

bench-speed: $(STAMP)
	$(PY) -m benchmarks speed

clean:
	rm -rf $(VENV) build *.egg-info
