"""A step of a simulator run and what is wrong in it (the page's and the history's unit)."""

from __future__ import annotations

import msgspec

from .exchange import Exchange

__all__ = ["Step", "StepFinding"]


class StepFinding(msgspec.Struct, frozen=True, kw_only=True):
    """What is wrong in a step, and the doc page and dashboard setting that fix it."""

    code: str
    message: str
    hint: str
    doc: str
    setting: str = ""
    source: str = ""
    requirement: str = ""


class Step(msgspec.Struct, kw_only=True):
    """One step of the run: ``ok`` is None when it did not run."""

    key: str
    title: str
    ok: bool | None = None
    summary: str = ""
    exchanges: list[Exchange] = msgspec.field(default_factory=list)
    findings: list[StepFinding] = msgspec.field(default_factory=list)

    def fail(self, finding: StepFinding) -> None:
        """The step failed, for ``finding`` (a finding alone, without ``ok`` false, is informational)."""
        self.ok = False
        self.findings.append(finding)

    @property
    def duration_ms(self) -> float:
        """The time the step's requests took."""
        return sum(x.elapsed_ms for x in self.exchanges)
