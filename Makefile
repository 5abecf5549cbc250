# Every target sets itself up: a fresh machine needs only Python 3.11 (and Go for the kube tests).
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint typecheck layers unit bench bench-cluster setup clean kind-controllers

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

## run: standalone pykueue with the example queues and jobs of examples/standalone/ (Ctrl-C to stop)
run: $(STAMP)
	$(BIN)/pykueue up --demo --config examples/standalone/config.yaml --port 0

## test: every check (ruff, mypy, import-linter, pytest)
test: lint typecheck layers unit

lint: $(STAMP)
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests

typecheck: $(STAMP)
	$(BIN)/mypy

layers: $(STAMP)
	$(BIN)/lint-imports

## kube-binaries: build the Kubernetes control plane for the kube tests from Go modules (cached)
kube-binaries:
	bash hack/kube-binaries

## kind-controllers: build the job kinds' controllers (JobSet, LWS, KubeRay, ...) for the kube tests (cached)
kind-controllers:
	bash hack/kind-controllers

unit: $(STAMP) kube-binaries kind-controllers
	$(BIN)/pytest

bench: $(STAMP)
	$(BIN)/python -m benchmarks.run

## bench-cluster: upstream's scheduler-performance shape against a real API server and `pykueue controller`
## (BENCH_CLUSTER_ARGS="--scale 0.2" for a reduced run); figures in docs/performance.md
bench-cluster: $(STAMP) kube-binaries
	$(BIN)/python -m benchmarks.cluster_bench $(BENCH_CLUSTER_ARGS)

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
