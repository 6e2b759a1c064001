# One-line entry points for a fresh machine (see README).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup demo test lint controlplane tools bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

## Set up and run the demo: `kai simulate` on the example cluster.
demo: $(STAMP)
	$(BIN)/kai simulate examples/demo-cluster.yaml

## Build the real Kubernetes control plane used by the integration tests (cached, outside the checkout).
controlplane:
	bash tests/controlplane/build.sh

## Build the pinned helm and kubectl the tests drive (cached, outside the checkout).
tools:
	bash tests/tools/build.sh

## Build the container image without Docker: a Debian base made with mmdebstrap, then podman
## build (installs podman, mmdebstrap and runc with apt-get when run as root; cached).
.PHONY: image
image:
	bash image/build.sh

## Set up and run the whole test suite, integration tests included, plus lint and type checks.
test: $(STAMP) controlplane tools lint
	bash image/build.sh
	$(BIN)/pytest

lint: $(STAMP)
	$(BIN)/ruff check kai tests bench
	$(BIN)/ruff format --check kai tests bench
	$(BIN)/mypy kai bench tests

bench: $(STAMP)
	$(BIN)/python bench/engine.py --nodes 1000 --pods 10000

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
