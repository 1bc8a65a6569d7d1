# Frontdoor: `make run` starts everything, `make test` tests everything. `make help` lists the rest.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
JOBS ?= 2
PACKAGES := libs/core libs/protocol libs/tenancy libs/identity libs/sessions libs/operations libs/conversations libs/webhooks libs/billing libs/sdk libs/httpkit services/issuer services/ledger services/console services/dispatcher tools/devstack examples/northwind
STAMP := $(VENV)/.installed

.DEFAULT_GOAL := help
.PHONY: help install run test test-fast check lint typecheck imports schemas openapi fmt bench clean-data

help: ## List the targets
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  \033[36m%-12s\033[0m %s\n", $$1, $$2}'

$(PY):
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(PY) requirements/constraints.txt requirements/dev.in $(foreach p,$(PACKAGES),$(p)/pyproject.toml)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -c requirements/constraints.txt -r requirements/dev.in $(foreach p,$(PACKAGES),-e $(p))
	@touch $(STAMP)

install: $(STAMP) ## Create the virtualenv and install every package (pinned)

run: $(STAMP) ## Start the whole stack (embedded PostgreSQL/Redis unless DATABASE_URL/REDIS_URL are set; REPLICAS=2 behind HAProxy; OIDC=1 adds a local OpenID Provider and a tenant signing in there)
	$(if $(REPLICAS),FRONTDOOR_REPLICAS=$(REPLICAS) )$(if $(OIDC),FRONTDOOR_DEMO_OIDC=$(OIDC) )$(PY) -m frontdoor_devstack.run

test: $(STAMP) ## Run the architecture check and the whole test suite (as CI does)
	$(VENV)/bin/lint-imports --no-cache
	$(PY) -m pytest -n $(JOBS) --dist loadgroup -q

test-fast: $(STAMP) ## Unit tests only
	$(PY) -m pytest -q tests/unit

lint: $(STAMP) ## ruff
	$(VENV)/bin/ruff check libs services tools tests bench examples scripts deploy

typecheck: $(STAMP) ## mypy (strict on libs)
	$(VENV)/bin/mypy libs/core/src libs/protocol/src libs/tenancy/src libs/identity/src libs/sessions/src libs/operations/src libs/conversations/src libs/webhooks/src libs/billing/src libs/sdk/src libs/httpkit/src services/issuer/src services/ledger/src services/console/src services/dispatcher/src examples/northwind/src

imports: $(STAMP) ## import-linter contracts
	$(VENV)/bin/lint-imports --no-cache

schemas: $(STAMP) ## Check docs/webhooks/schemas is what the event payload structs generate
	$(PY) scripts/export_webhook_schemas.py --check

openapi: $(STAMP) ## Check docs/api holds the OpenAPI documents the console, ledger and issuer generate
	$(PY) scripts/export_openapi.py --check

check: lint typecheck imports schemas openapi ## Lint, type checks, import contracts, generated schemas and OpenAPI

bench: $(STAMP) ## Benchmarks (each prints a ratio against a same-run baseline)
	$(PY) bench/run_all.py

clean-data: ## Delete the dev data directory (embedded databases, dev KEK, demo credentials)
	rm -rf $${FRONTDOOR_DATA_DIR:-.data}
