# pullspec — every target bootstraps its own virtual environment.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
SHARED ?= ../shared

.PHONY: all run test lint typecheck pytest verify verify-quick bench fuzz docs java-check browser clean

all: test

$(BIN)/python:
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "error: $(PYTHON) not found; install Python 3.11"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test,spark,accel]'
	@touch $@

java-check:
	@if ! command -v java >/dev/null 2>&1; then \
	  echo "error: Java 17 is required by PySpark and was not found."; \
	  echo "       install it with: apt-get install openjdk-17-jre-headless"; exit 1; fi
	@v=$$(java -version 2>&1 | sed -n 's/.*version "\(1\.\)\{0,1\}\([0-9]*\).*/\2/p' | head -1); \
	if [ -z "$$v" ] || [ "$$v" -lt 17 ]; then \
	  echo "error: Java $$v found; PySpark needs Java 17."; \
	  echo "       install it with: apt-get install openjdk-17-jre-headless"; exit 1; fi

# Headless Chromium for the docs' browser test: installed when missing and we are root;
# otherwise the test skips and says how to install it.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing chromium (docs browser test)"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	      || echo "warning: could not install chromium; the browser test will be skipped"; \
	  else echo "note: chromium missing (apt-get install chromium); the browser test will be skipped"; fi; }

# The main job: a campaign of a few minutes on local Spark — fast against the reference over every
# area (those fast does not implement are listed as unsupported) — printing the summary; it exits
# non-zero on any divergence. Rows and report: build/campaign.
run: $(VENV)/.installed-test java-check
	$(BIN)/pullspec campaign --impl fast --master 'local[*]' --seeds 600 --steps 500 --sim-steps 1000 --out build/campaign

lint: $(VENV)/.installed-test
	$(BIN)/ruff check spec reference fast conformance tests
	$(BIN)/ruff format --check spec reference fast conformance tests

# mypy cannot see through the editable install's import hook: it checks the four folders through
# links named as they are installed (pullspec.spec, ...).
TYPECHECK_ROOT := build/typecheck/pullspec
typecheck: $(VENV)/.installed-test
	@mkdir -p $(TYPECHECK_ROOT)
	@for d in spec reference fast conformance; do ln -sfn ../../../$$d $(TYPECHECK_ROOT)/$$d; done
	$(BIN)/mypy

pytest: $(VENV)/.installed-test java-check browser
	@$(BIN)/python -m pytest; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "error: pytest collected no tests"; exit 1; fi; exit $$rc

test: lint typecheck pytest

# CrossHair over every rule's contracts (long); `verify-quick` is the bounded subset make test runs.
verify: $(VENV)/.installed-test
	$(BIN)/pullspec verify --per-condition-timeout 4

verify-quick: $(VENV)/.installed-test
	$(BIN)/pullspec verify --quick

# The client areas: `fast` implements none of them, so their campaign bench runs the reference
# against itself (every op is two reference runs).
CLIENT_AREAS := pull_loop,pull_decision,pull_result,pull_request,pull_service,offset_store
CLIENT_AREAS := $(CLIENT_AREAS),allocate,rebalance,consume_concurrently,consume_orderly
CLIENT_AREAS := $(CLIENT_AREAS),process_queue_maintenance,schedule

# Speed figures as JSON, each ratio measured in one run (fast vs reference, then the campaign
# over fast's areas, then over the client areas).
bench: $(VENV)/.installed-test java-check
	$(BIN)/pullspec bench --json
	$(BIN)/pullspec bench-campaign --json
	$(BIN)/pullspec bench-campaign --json --impl reference --area $(CLIENT_AREAS) --seeds 64

# Long fuzzing: every Hypothesis test at the fuzz budget, 200 kill -9 trials of a fast writer,
# 1000 of a process whose four threads write at once, and 4 writer x 2 reader threads x 2,000.
fuzz: $(VENV)/.installed-test
	HYPOTHESIS_PROFILE=fuzz PULLSPEC_KILL_TRIALS=200 PULLSPEC_MULTI_KILL_TRIALS=1000 \
	  PULLSPEC_THREAD_MESSAGES=2000 $(BIN)/python -m pytest -x tests

# The reviewers' spec site: rule pages generated from spec/, built strict (warnings fail).
docs: $(VENV)/.installed-test
	$(BIN)/python -m pullspec.conformance.docs build

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis build *.egg-info
