"""The dashboard's agent simulator (issue #19 §1): a real agent, hosted by Frontdoor, played
against the tenant's own live configuration with every exchange shown, secrets redacted."""

from __future__ import annotations

from .exchange import REDACTED, DecodedJwt, Exchange, RecordingFetcher
from .identity import SOFTWARE_ID, SimulatorIdentity, client_id_for, is_simulator, load_identity, register_client_id
from .run import Step, StepFinding, simulate

__all__ = [
    "REDACTED",
    "SOFTWARE_ID",
    "DecodedJwt",
    "Exchange",
    "RecordingFetcher",
    "SimulatorIdentity",
    "Step",
    "StepFinding",
    "client_id_for",
    "is_simulator",
    "load_identity",
    "register_client_id",
    "simulate",
]
