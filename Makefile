# pdd-emu: every gate a person or CI uses is one target here. `make help` lists them.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=
SCENARIO ?= pdd-mini
LOAD_DURATION ?= 300s

.DEFAULT_GOAL := help
.PHONY: help venv run test test-fast test-compose test-chaos soak-faults load bench experiments up down logs clean

help: ## list the targets
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-13s %s\n", $$1, $$2}'

# Two stamps: `make run` needs only the package's own dependencies (RUN_STAMP); every other gate
# installs the extras too (STAMP): tests, Ray sweeps, Locust, tokenizer export.
# --no-compile: Python compiles the modules a run imports, not all 40 packages' (a quarter less CPU).
RUN_STAMP := $(VENV)/.installed-run
EXTRAS := test,sweep,load,tokenizer

$(RUN_STAMP): pyproject.toml
	$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "pdd-emu needs Python 3.11+"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check --no-compile -e .
	touch $(RUN_STAMP)

$(STAMP): $(RUN_STAMP)
	$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[$(EXTRAS)]'
	touch $(STAMP)

venv: $(STAMP) ## create or update the virtual environment in .venv, with every extra

run: $(RUN_STAMP) ## the main job: three meshes under one load compared, then what to buy (writes out/; about 4 min, .venv included)
	$(BIN)/pdd-emu demo --out out

test: $(STAMP) ## run the whole test suite (but the compose and chaos stages)
	$(BIN)/python -m pytest -m "not compose and not chaos" --durations=12 $(PYTEST_ARGS)

test-fast: $(STAMP) ## unit tests only (no processes, namespaces or docker)
	$(BIN)/python -m pytest -m 'not integration and not kernel and not compose and not chaos and not slow' $(PYTEST_ARGS)

test-chaos: $(STAMP) ## every chaos scenario, quick, in both modes: real meshes under load (about 12 min)
	$(BIN)/python -m pytest -m chaos tests/chaos --durations=12 $(PYTEST_ARGS)

soak-faults: $(STAMP) ## a different fault every minute for 30 min under load: 0 lost, RSS bounded (QUICK=1: 3 min; not in CI)
	$(BIN)/pdd-emu chaos fault-soak $(if $(QUICK),--quick,) --json --run-dir out/soak-faults

load: $(STAMP) ## Locust soak of pdd-mini at its rated load: zero errors, RSS of every process (LOAD_DURATION=300s)
	$(BIN)/pdd-emu chaos soak --duration $(LOAD_DURATION) --run-dir out/soak

bench: $(STAMP) ## run every benchmark (QUICK=1 for short runs); figures go to docs/ by hand
	$(BIN)/python benchmarks/run_all.py $(if $(QUICK),--quick,)

EXPERIMENTS ?= paper bathtub handoff wan

experiments: $(STAMP) ## reproduce the PDD report's measurements into out/experiments (QUICK=1: short runs; docs/results.md)
	for name in $(EXPERIMENTS); do $(BIN)/pdd-emu experiment $$name $(if $(QUICK),--quick,) --out out/experiments || exit 1; done

# The stack makes its own tokens at first start (its `tokens` service): `up` needs no prior step.
COMPOSE := docker compose -f compose/compose.yaml

# `make down` stops the containers in seconds, then removes them in the background: on Docker's vfs
# storage driver each container is a full copy of the image, and deleting one took about 45 s, which
# made a plain `compose down` take 2.5 minutes. `make up` first waits for a removal still under way.
ALL_PROFILES := --profile load --profile chaos --profile netem
PROJECT = $${COMPOSE_PROJECT_NAME:-pdd-emu}
REMOVING = compose/.removing-$(PROJECT)

up: ## run the mesh as Docker containers (COMPOSE_PROJECT_NAME, PDD_EMU_PORT, PDD_EMU_SCENARIO, PDD_EMU_SET; docs/compose.md)
	@if [ -s $(REMOVING).pid ] && kill -0 "$$(cat $(REMOVING).pid)" 2>/dev/null; then \
	  echo "waiting for the last make down to remove its containers ($(REMOVING).log)"; \
	  tail --pid="$$(cat $(REMOVING).pid)" -f /dev/null; fi
	PDD_EMU_SCENARIO=$${PDD_EMU_SCENARIO:-$(SCENARIO)} $(COMPOSE) up -d --build --wait
	@echo "router: http://localhost:$${PDD_EMU_PORT:-8000}"

down: ## stop the Docker mesh in seconds; its containers and volumes (the plan, and the tokens: the next up makes new ones) are then removed in the background
	$(COMPOSE) $(ALL_PROFILES) stop --timeout 10
	@nohup $(COMPOSE) $(ALL_PROFILES) down -v --remove-orphans > $(REMOVING).log 2>&1 & echo $$! > $(REMOVING).pid
	@echo "stopped; its containers are being removed in the background ($(REMOVING).log)"

logs: ## follow the Docker mesh's logs
	$(COMPOSE) logs -f

test-compose: $(STAMP) ## the Docker tests: build, run both DCs, break and recover (needs a Docker engine)
	$(BIN)/python -m pytest -m compose tests/compose $(PYTEST_ARGS)

clean: ## remove the virtual environment and outputs
	rm -rf $(VENV) .venv-aiperf .venv-guidellm .venv-inference-perf out .pytest_cache
