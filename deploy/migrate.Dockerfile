# Frontdoor migrate: a one-shot job that brings the database schema up to date
# (deploy/migrate.py), run before the services start (compose `migrate`, a Kubernetes Job).
# Build context is the repository root:
#   docker build -f deploy/migrate.Dockerfile -t frontdoor-migrate .
# It installs every library that owns tables (and what they depend on), nothing else:
# tests/unit/test_deploy_files.py checks this list against deploy/migrate.py.

ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm

# --- build -------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_ROOT_USER_ACTION=ignore
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src
COPY requirements/constraints.txt requirements/constraints.txt
COPY libs/core libs/core
COPY libs/protocol libs/protocol
COPY libs/tenancy libs/tenancy
COPY libs/identity libs/identity
COPY libs/sessions libs/sessions
COPY libs/webhooks libs/webhooks
COPY libs/operations libs/operations
COPY libs/conversations libs/conversations
COPY libs/billing libs/billing
RUN pip install -c requirements/constraints.txt \
        libs/core libs/protocol libs/tenancy libs/identity libs/sessions libs/webhooks libs/operations \
        libs/conversations libs/billing \
    && pip check

# --- runtime -----------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS runtime
LABEL org.opencontainers.image.title="frontdoor-migrate" \
      org.opencontainers.image.description="Frontdoor schema migrations (one-shot)"
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN groupadd --system --gid 10001 frontdoor \
    && useradd --system --uid 10001 --gid frontdoor --home-dir /nonexistent --no-create-home \
        --shell /usr/sbin/nologin frontdoor
COPY --from=build /opt/venv /opt/venv
COPY deploy/migrate.py /opt/frontdoor/migrate.py
USER 10001:10001
CMD ["python", "/opt/frontdoor/migrate.py"]
