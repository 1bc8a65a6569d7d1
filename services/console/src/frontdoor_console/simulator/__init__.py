"""The dashboard's agent simulator (issue #19 §1): a real agent, hosted by Frontdoor, played
against the tenant's own live configuration with every exchange shown, secrets redacted."""

from __future__ import annotations

from .exchange import REDACTED, DecodedJwt, Exchange, RecordingFetcher
from .history import LISTED, RunRecord, StoredStep, get_run, latest_runs, record_run, status_of
from .identity import SOFTWARE_ID, SimulatorIdentity, client_id_for, is_simulator, load_identity, register_client_id
from .operation import OperationTarget, operation_target
from .pending import PendingRun, PendingRuns, SignInWait
from .run import redeem, resume, simulate
from .step import Step, StepFinding

__all__ = [
    "LISTED",
    "OperationTarget",
    "PendingRun",
    "PendingRuns",
    "SignInWait",
    "REDACTED",
    "SOFTWARE_ID",
    "DecodedJwt",
    "Exchange",
    "RecordingFetcher",
    "RunRecord",
    "SimulatorIdentity",
    "Step",
    "StepFinding",
    "StoredStep",
    "client_id_for",
    "get_run",
    "is_simulator",
    "latest_runs",
    "load_identity",
    "operation_target",
    "record_run",
    "redeem",
    "register_client_id",
    "resume",
    "simulate",
    "status_of",
]
