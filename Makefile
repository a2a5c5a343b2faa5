# kube-nudge developer entry points. `make demo` and `make test` do all set-up themselves.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: help install lint audit test test-unit test-integration control-plane demo clean

help:
	@echo "make demo   - start a local cluster, roll a Deployment, print a summary, stop"
	@echo "make test   - install, lint, build/reuse the control plane, run every test"

$(STAMP): pyproject.toml requirements/dev.lock
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check --require-hashes -r requirements/dev.lock
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $@

install: $(STAMP)

lint: $(STAMP) audit
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy

# Supply chain. bandit: any finding in src/ fails (accepted ones carry `# nosec BXXX # reason`).
# pip-audit: every pin of requirements/dev.lock against a vulnerability service
# (PIP_AUDIT_SERVICE=pypi or osv). A known vulnerability fails. A service that cannot be
# reached, or that has no entry for some pins, is said in one line and does not fail (CI may
# reach neither); AUDIT_STRICT=1 makes that fail too. Full pip-audit output: .venv/pip-audit.log
PIP_AUDIT_SERVICE ?= pypi
AUDIT_STRICT ?= 0
audit: $(STAMP)
	$(BIN)/bandit -c pyproject.toml -r src -q
	@log=$(VENV)/pip-audit.log; pins=$$(grep -c '^[A-Za-z0-9].*==' requirements/dev.lock); \
	$(BIN)/pip-audit -r requirements/dev.lock --require-hashes --disable-pip --timeout 10 \
		--progress-spinner off -s $(PIP_AUDIT_SERVICE) >$$log 2>&1; rc=$$?; \
	skipped=$$(grep -c 'could not be audited' $$log); \
	if grep -Eq '^Found [0-9]+ known vulnerabilit' $$log; then \
		cat $$log; echo "pip-audit: KNOWN VULNERABILITIES in requirements/dev.lock (above)"; exit 1; \
	elif [ $$rc -ne 0 ] && grep -Eiq 'connect|resolve|timed? ?out|unreachable' $$log; then \
		echo "pip-audit: NOT CHECKED - $(PIP_AUDIT_SERVICE) vulnerability service unreachable" \
			"($$(grep -Eio "(failed to resolve|could not connect|timed out|refused)[^()]*" $$log \
			| tail -1)); see $$log"; \
		[ "$(AUDIT_STRICT)" = 0 ]; \
	elif [ $$rc -ne 0 ]; then \
		cat $$log; echo "pip-audit failed (exit $$rc)"; exit $$rc; \
	elif [ $$skipped -gt 0 ]; then \
		echo "pip-audit: NOT CHECKED - $$skipped of $$pins pins unknown to the" \
			"$(PIP_AUDIT_SERVICE) vulnerability service (unreachable or 404); see $$log"; \
		[ "$(AUDIT_STRICT)" = 0 ]; \
	else \
		echo "pip-audit: no known vulnerabilities in $$pins pins ($(PIP_AUDIT_SERVICE))"; \
	fi

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
