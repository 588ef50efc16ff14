# ksmith: `make dataset` runs the pipeline on the embedded default, `make test` runs every test.
# Both set up what they need (Rust build, the Python environment) on a fresh machine.

CARGO    ?= cargo
CONFIG   ?= configs/default.toml
WORKDIR  ?= work
KSMITH_VENV ?= $(HOME)/.cache/ksmith/venv
export KSMITH_VENV
KSMITH_TRAINERS_VENV ?= $(HOME)/.cache/ksmith/trainers-venv
export KSMITH_TRAINERS_VENV
# No incremental state for the test and lint builds: on a fresh clone it would add gigabytes that
# are never reused. Set CARGO_INCREMENTAL=1 in the environment to keep it while iterating.
CARGO_INCREMENTAL ?= 0
export CARGO_INCREMENTAL
PYTHON   := $(KSMITH_VENV)/bin/python
KSMITH   := target/release/ksmith
# Each test suite fails when it leaves a process running (a daemon a test did not stop).
NO_LEFTOVERS := $(PYTHON) scripts/no_leftovers.py --

.PHONY: all build venv trainers chromium sandbox dataset test test-rust test-python test-trainers lint bench kernelbench-signatures clean

all: build

## The Python environment (torch, triton), cached outside the clone and reused.
venv:
	scripts/setup-python.sh

## verl, TRL and OpenRLHF at the releases the dataset cards target, on top of the venv's torch
## (python/requirements-trainers.txt; about 45 s from scratch, cached and reused).
trainers: venv
	scripts/setup-trainers.sh

## Headless Chromium for the report test (Debian package; needs root or sudo once).
chromium:
	scripts/setup-chromium.sh

## bubblewrap, the sandbox for untrusted code (Debian package as root, else a carried .deb).
sandbox:
	scripts/setup-bwrap.sh

build:
	$(CARGO) build --release -p ksmith-cli

## Runs every stage on the configured sources (default: the sample corpus under data/).
dataset: venv sandbox build
	$(KSMITH) run --config $(CONFIG) --workdir $(WORKDIR)

## Every test: formatting, lints, Rust unit and integration tests, Python tests, and the
## trainer tests (the `trainers` marker: the trainers build their datasets from each card),
## each suite failing when a process it started outlives it (scripts/no_leftovers.py).
test: venv trainers chromium sandbox lint test-rust test-python test-trainers

lint: venv
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(KSMITH_VENV)/bin/ruff check python scripts
	$(KSMITH_VENV)/bin/ruff format --check python scripts

test-rust: venv
	$(NO_LEFTOVERS) $(CARGO) test --workspace

test-python: venv
	@if [ -d python/tests ]; then $(NO_LEFTOVERS) $(PYTHON) -m pytest -q python/tests; fi

test-trainers: trainers
	$(NO_LEFTOVERS) $(KSMITH_TRAINERS_VENV)/bin/python -m pytest -q -m trainers python/tests/trainers

## Benchmarks; each prints a table.
bench: venv sandbox
	$(CARGO) bench --workspace
	$(PYTHON) scripts/sandbox_bench.py
	$(PYTHON) scripts/eval_cpu_bench.py

## Regenerates the committed KernelBench signatures (dedup's offline decontamination) from a git
## checkout of KernelBench at the pinned commit: make kernelbench-signatures KERNELBENCH=<checkout>
kernelbench-signatures:
	@test -n "$(KERNELBENCH)" || { echo "set KERNELBENCH=<KernelBench git checkout>"; exit 2; }
	$(CARGO) run --release -q -p ksmith-dedup --example benchmark_signatures -- $(KERNELBENCH) \
		$$(git -C $(KERNELBENCH) rev-parse HEAD) > crates/ksmith-dedup/data/kernelbench-signatures.json.tmp
	mv crates/ksmith-dedup/data/kernelbench-signatures.json.tmp crates/ksmith-dedup/data/kernelbench-signatures.json

clean:
	$(CARGO) clean
	rm -rf $(WORKDIR)
