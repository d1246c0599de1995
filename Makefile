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

.PHONY: build render test system-deps venv clean

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
	$(VENV)/bin/rocmstack render $(RECIPE) --gpu-arch '$(GPU_ARCH)' -o build/$(RECIPE)-$(GPU_ARCH)

test: system-deps $(STAMP)
	ROCMSTACK_REQUIRE_INTEGRATION=1 $(VENV)/bin/python -m pytest $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) build .pytest_cache .hypothesis
