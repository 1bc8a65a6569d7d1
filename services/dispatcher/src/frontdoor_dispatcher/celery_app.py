"""The Celery app: Redis broker, periodic jobs scheduled by beat.

Jobs are thin: each calls one use case of a domain library. The database, not the
broker, holds the state (a lost task is re-found by the next sweep).
"""

from __future__ import annotations

import os

from celery import Celery
from celery.signals import setup_logging
from frontdoor_core.dev_mode import warn_if_dev_mode
from frontdoor_core.logging import configure_logging

from .observability import connect as connect_tracing
from .settings import load
from .task_metrics import connect as connect_metrics
from .task_metrics import prepare as prepare_metrics

__all__ = ["app", "broker_url"]



def broker_url(redis_url: str) -> str:
    """Kombu spells Unix-socket Redis ``redis+socket://``; redis-py spells it ``unix://``."""
    if redis_url.startswith("unix://"):
        return "redis+socket://" + redis_url[len("unix://"):]
    return redis_url


_settings = load()
prepare_metrics(_settings.metrics_port)  # before any metric exists: prefork children share one listener
connect_metrics(_settings.metrics_port)  # task runs counted from signals; /metrics from the worker's parent
# The broker is a single Redis even when the services use a Redis Cluster (kombu has no cluster
# transport): FRONTDOOR_CELERY_BROKER_URL, else REDIS_URL.
app = Celery("frontdoor", broker=broker_url(_settings.celery_broker_url or _settings.redis_url or "redis://127.0.0.1:6379/0"),
             include=["frontdoor_dispatcher.tasks.domains", "frontdoor_dispatcher.tasks.keys",
                      "frontdoor_dispatcher.tasks.webhooks", "frontdoor_dispatcher.tasks.recoveries",
                      "frontdoor_dispatcher.tasks.billing", "frontdoor_dispatcher.tasks.conversations",
                      "frontdoor_dispatcher.tasks.funnel", "frontdoor_dispatcher.tasks.retention"])
app.conf.update(
    task_serializer="json",
    accept_content=["json"],
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    worker_prefetch_multiplier=1,
    broker_connection_retry_on_startup=True,
    beat_schedule_filename=os.path.join(_settings.data_dir, "celerybeat-schedule"),
    beat_schedule={
        "keys-prune": {"task": "frontdoor.keys.prune_retired", "schedule": 24 * 3600.0},
        # a run prunes for up to 50 s (message_pruning.BUDGET), so a backlog is cleared within hours
        "webhooks-prune": {"task": "frontdoor.webhooks.prune", "schedule": 300.0, "options": {"expires": 300.0}},
        "events-prune": {"task": "frontdoor.events.prune_forwarded", "schedule": 3600.0},
        # webhook_attempts' monthly partitions ahead and past retention; the audit log in chunks
        "retention-partitions": {"task": "frontdoor.retention.partitions", "schedule": 24 * 3600.0},
        "retention-audit": {"task": "frontdoor.retention.audit", "schedule": 3600.0, "options": {"expires": 3600.0}},
        "retention-sessions": {"task": "frontdoor.retention.sessions", "schedule": 3600.0,
                               "options": {"expires": 3600.0}},
        "retention-operations": {"task": "frontdoor.retention.operations", "schedule": 3600.0,
                                 "options": {"expires": 3600.0}},
        "webhooks-recoveries": {"task": "frontdoor.webhooks.recoveries", "schedule": 5.0,
                                "options": {"expires": 5.0}},
        # closed days counted and sent to Stripe Billing Meters; twice at once or after a crash is safe
        "billing-meter": {"task": "frontdoor.billing.meter", "schedule": 900.0, "options": {"expires": 900.0}},
        # conversation events past each tenant's retention_days, in chunks within a budget
        "conversations-retention": {"task": "frontdoor.conversations.retention", "schedule": 600.0,
                                    "options": {"expires": 600.0}},
        # the dashboard's agent funnel: closed days materialised per tenant behind a mark
        "analytics-funnel": {"task": "frontdoor.analytics.funnel_rollup", "schedule": 900.0,
                             "options": {"expires": 900.0}},
        "operations-expire": {"task": "frontdoor.operations.expire_due", "schedule": 30.0,
                              "options": {"expires": 30.0}},
        "domains-sweep": {
            "task": "frontdoor.domains.sweep",
            "schedule": _settings.domain_sweep_interval.total_seconds(),
            "options": {"expires": _settings.domain_sweep_interval.total_seconds()},
        },
    },
    timezone="UTC",
)


@setup_logging.connect
def _configure_logging(**_: object) -> None:
    """Use Frontdoor's redacting JSON logging instead of Celery's own."""
    configure_logging(level=_settings.log_level, fmt=_settings.log_format)
    # Once per worker or beat start: its logging is set up just before it runs.
    warn_if_dev_mode(_settings, "celery", os.environ)


connect_tracing(_settings)  # each forked worker: tracer provider, instrumentations (observability)
