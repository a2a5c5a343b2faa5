# kube-nudge developer entry points. `make demo` and `make test` do all set-up themselves.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: help install lint test test-unit test-integration control-plane demo clean

help:
	@echo "make demo   - start a local cluster, roll a Deployment, print a summary, stop"
	@echo "make test   - install, lint, build/reuse the control plane, run every test"

$(STAMP): pyproject.toml requirements/dev.lock
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check --require-hashes -r requirements/dev.lock
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $@

install: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy

# Builds the pinned etcd/Kubernetes/kwok binaries on first use (minutes), then reuses them.
control-plane: $(STAMP)
	$(BIN)/kube-nudge build-control-plane

test-unit: $(STAMP)
	$(BIN)/pytest tests/unit

test-integration: control-plane
	$(BIN)/pytest tests/integration

test: lint control-plane
	$(BIN)/pytest

demo: control-plane
	$(BIN)/python -m kube_nudge.devcluster.demo

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis

# Benchmarks (bench/): a fresh local cluster per scenario, kube-nudge as a subprocess.
# Writes bench/results/latest.json and BENCHMARKS.md; BENCH_QUICK=1 is a small smoke run.
.PHONY: bench
bench: control-plane
	PYTHONPATH=$(CURDIR) $(BIN)/python -m bench.run
