# Quick start: `make demo` (the default benchmark, printing a table) and `make test`.
# Both create .venv with pip on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test bench-speed clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test]"
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m benchmarks demo

test: $(STAMP)
	$(PY) -m pytest -q

bench-speed: $(STAMP)
	$(PY) -m benchmarks speed

clean:
	rm -rf $(VENV) build *.egg-info
