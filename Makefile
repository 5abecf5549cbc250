# Every target sets itself up: a fresh machine needs only Python 3.11 (and Go for the kube tests).
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint typecheck layers unit bench bench-cluster bench-large-scale bench-upstream kueue-perf-binaries \
	upstream-oracle diff-upstream setup clean constraints dist test-dist test-pythons image test-image kind-controllers kueuectl kueue-manager fuzz

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

## kueuectl: build upstream Kueue's kubectl plugin (`kubectl kueue`) for the kube tests (cached)
kueuectl:
	bash hack/kueuectl

## kueue-manager: build upstream Kueue's controller manager for the kube test of migrating from it (cached)
kueue-manager:
	bash hack/kueue-manager

## unit: pytest in two tiers: the tests outside tests/kube while the kube tests' Go binaries build, then tests/kube
unit: $(STAMP)
	bash hack/test-tiers $(BIN)/pytest

## fuzz: the property tests with a fresh random search (CI draws the same examples every run)
fuzz: $(STAMP)
	PYKUEUE_HYPOTHESIS=search $(BIN)/pytest -p no:cacheprovider tests/engine/test_properties.py tests/engine/test_cohort_tree.py tests/standalone/security/test_fuzz.py

bench: $(STAMP)
	$(BIN)/python -m benchmarks.run

## bench-cluster: upstream's scheduler-performance shape against a real API server and `pykueue controller`
## (BENCH_CLUSTER_ARGS="--scale 0.2" for a reduced run); figures in docs/performance.md
bench-cluster: $(STAMP) kube-binaries
	$(BIN)/python -m benchmarks.cluster_bench $(BENCH_CLUSTER_ARGS)

## bench-large-scale: the routine check for the large-scale shape (1,000 ClusterQueues) at a fiftieth of its
## Workloads, the controller warm and at upstream_bench's client limits: controller CPU, Workload writes per
## Workload (fails above 2.5), evictions (compare with docs/performance.md before merging engine or controller work)
bench-large-scale: $(STAMP) kube-binaries
	$(BIN)/python -m benchmarks.cluster_bench --shape large-scale --scale 0.02 --warm-up 5 --qps 50 \
		--controller-arg=--burst=100 --max-status-writes-per-workload 2.5 $(BENCH_LARGE_SCALE_ARGS)

## kueue-perf-binaries: build upstream Kueue's scheduler-performance runner, minimalkueue and checker (cached)
kueue-perf-binaries:
	bash hack/kueue-perf-binaries

## bench-upstream: upstream's own runner against minimalkueue and `pykueue controller`, one table
## (BENCH_UPSTREAM_ARGS="--scale 0.3 --shapes baseline --runs 3"; "--warm-up 5" starts each controller
## before the runner instead of with it); figures in docs/performance.md
bench-upstream: $(STAMP) kube-binaries kueue-perf-binaries
	$(BIN)/python -m benchmarks.upstream_bench $(BENCH_UPSTREAM_ARGS)

## upstream-oracle: build the differential test's oracle (hack/diff-upstream/oracle: upstream Kueue's scheduler
## and core controllers, sigs.k8s.io/kueue pinned in its go.mod) from the Go module proxy (cached)
upstream-oracle:
	bash hack/upstream-oracle

## diff-upstream: random cases on pykueue's scenario runner and on upstream's scheduler (the oracle on a real
## kube-apiserver), compared step by step; divergences shrunk into out/diff-upstream/ (DIFF_ARGS="--cases N
## --seed S"); last line "N cases, K divergences (D documented)"; docs/differential.md
diff-upstream: $(STAMP) kube-binaries upstream-oracle
	$(BIN)/python -m benchmarks.diff_upstream $(DIFF_ARGS)

## constraints: pin the tested set (every dependency, dev included) for Python 3.11-3.13 in constraints.txt
constraints: $(STAMP)
	$(BIN)/uv pip compile pyproject.toml --extra dev --universal --python-version 3.11 \
		--custom-compile-command "make constraints" --no-annotate -o constraints.txt

## dist: the wheel and the sdist in dist/
dist: $(STAMP)
	rm -rf dist
	$(BIN)/python -m build --outdir dist . >dist.log 2>&1 || { tail -n 30 dist.log; exit 1; }
	rm -f dist.log
	@ls dist

## test-dist: the wheel and sdist hold what pykueue reads; pip and pipx installs from a clean clone work
test-dist: dist
	bash hack/test-dist

## test-pythons: the unit tests (not the kube tests) on Python 3.12 and 3.13, each in a fresh venv from the wheel
test-pythons: dist
	bash hack/test-pythons $(PYTHONS_TO_TEST)

## image: the controller image, with buildah from Debian packages (hack/build-image; cached after the first build)
image:
	bash hack/build-image

## test-image: build the image, then run its controller against the test control plane (tests/kube/controller/test_image.py)
test-image: $(STAMP) kube-binaries image
	$(BIN)/pytest -m image tests/kube/controller/test_image.py

clean:
	rm -rf $(VENV) .pythons .mypy_cache .pytest_cache .ruff_cache build dist
