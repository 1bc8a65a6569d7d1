"""The benchmarks import, parse their flags, compute their statistics and sign valid requests.

No timing is asserted. Only the parts that need no servers run here: the sdk benchmark in
``--crypto-only`` mode (in-process introspection) with a handful of iterations.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest

from bench import _common, run_all, sdk_verify, session_grant


def test_percentile_interpolates_between_ranks() -> None:
    assert _common.percentile([3.0], 99) == 3.0
    assert _common.percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert _common.percentile([4.0, 1.0, 3.0, 2.0], 0) == 1.0
    assert _common.percentile(list(range(101)), 99) == 99.0
    with pytest.raises(ValueError):
        _common.percentile([], 50)
    with pytest.raises(ValueError):
        _common.percentile([1.0], 101)


def test_summarize_reports_milliseconds() -> None:
    s = _common.summarize([0.001, 0.002, 0.003])
    assert s.n == 3
    assert s.p50_ms == pytest.approx(2.0)
    assert s.mean_ms == pytest.approx(2.0)
    assert s.max_ms == pytest.approx(3.0)
    assert "p50 2.00 ms" in s.line()
    assert _common.rate(10, 2.0) == 5.0
    assert _common.rate(10, 0.0) == 0.0
    assert _common.fmt_ms(0.1234) == "0.123 ms"


def test_flags_parse() -> None:
    args = session_grant.parse_args([])
    assert (args.requests, args.concurrency, args.workers) == (3000, 8, session_grant.default_workers())
    assert session_grant.parse_args(["--workers", "3"]).workers == 3
    quick = session_grant.parse_args(["--quick", "--concurrency", "4"])
    assert quick.requests <= 600 and quick.concurrency == 4
    with pytest.raises(SystemExit):
        session_grant.parse_args(["--requests", "0"])
    assert sdk_verify.parse_args(["--crypto-only"]).crypto_only
    assert sdk_verify.parse_args(["--quick"]).iterations == 500
    assert run_all.parse_args(["--quick", "--strict"]).strict


def test_the_agent_signs_what_the_token_endpoint_verifies() -> None:
    from frontdoor_protocol.client_assertion import verify_client_assertion
    from frontdoor_protocol.dpop_proof import verify_dpop_proof
    from frontdoor_protocol.session_assertion import verify_session_assertion
    from joserfc.jwk import KeySet

    agent = _common.Agent("https://agent.bench.example")
    issuer = "https://auth.bench.example/t"
    body, headers = agent.token_request(issuer, "user-1")
    form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
    keys = KeySet.import_key_set(agent.jwks())  # type: ignore[arg-type]
    now = int(time.time())
    assert form["grant_type"] == _common.JWT_BEARER
    verify_client_assertion(form["client_assertion"], client_id=agent.client_id, issuer=issuer, keys=keys, now=now)
    assert verify_session_assertion(form["assertion"], client_id=agent.client_id, issuer=issuer, keys=keys,
                                    now=now).user_id == "user-1"
    verify_dpop_proof(headers["dpop"], method="POST", url=f"{issuer}/oauth/token", now=now, access_token=None)
    assert agent.metadata()["client_id"] == agent.client_id


def test_collapsed_stacks_summary(tmp_path: Path) -> None:
    raw = tmp_path / "raw.txt"
    raw.write_text("process 1;main (app.py:1);verify (jws.py:9) 3\nprocess 1;main (app.py:1) 1\n")
    lines = _common.summarize_collapsed(raw, top=3)
    assert lines[0].startswith("4 samples")
    assert any("75.0%  verify (jws.py)" in line for line in lines)
    assert _common.summarize_collapsed(tmp_path / "missing.txt") == ["(py-spy wrote nothing)"]


def test_cpu_meter_accounts_this_process() -> None:
    meter = _common.CpuMeter({"self": os.getpid()})
    meter.start()
    sum(i * i for i in range(20_000))
    used = meter.stop()
    assert set(used) == {"self", "load generator", "other processes"}
    assert all(v >= 0 for v in used.values())


def test_sdk_benchmark_runs_without_servers(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sdk_verify, "install_signal_handlers", lambda: None)
    result = sdk_verify.main(["--crypto-only", "--iterations", "20", "--state-iterations", "10", "--warmup", "2"])
    assert result["errors"] == 0, result["error_samples"]
    assert result["a"].n == 20 and result["c"].n == 10
    out = capsys.readouterr().out
    assert "(b) verify_resource_request" in out and "MockTransport" in out


def test_summary_lines_mark_targets() -> None:
    lat = _common.summarize([0.01, 0.02])
    grant: dict[str, Any] = {"endpoint_rps": 300.0, "latency": lat, "errors": 0, "floor_ops": 500.0, "ratio": 0.6,
                             "cpu_ratio": 0.6}
    sdk: dict[str, Any] = {"b": _common.summarize([0.0002]), "ratio_b_a": 2.0, "c_minus_b_p50_ms": 1.0,
                           "c_minus_b_p99_ms": 2.0, "state_via": "x"}
    lines, met = run_all.summary_lines(grant, sdk)
    assert met and "MISSED" not in "\n".join(lines)
    lines, met = run_all.summary_lines({**grant, "ratio": 0.2}, sdk)
    assert not met and "MISSED" in "\n".join(lines)
    lines, met = run_all.summary_lines({**grant, "cpu_ratio": 0.3}, sdk)  # the CPU ratio is a target too
    assert not met and "MISSED" in "\n".join(lines)


def test_delivery_benchmarks_parse_their_flags() -> None:
    from bench import confirm_latency, delivery_throughput

    args = confirm_latency.parse_args([])
    assert (args.rate, args.warmup) == (200.0, 200)
    # The ledger's workers default to what `make run` starts (FRONTDOOR_LEDGER_WORKERS, 0: one per CPU).
    from frontdoor_core.settings import load_settings
    from frontdoor_ledger.serve import worker_count
    assert args.workers == confirm_latency.make_run_workers({}) == worker_count(load_settings({}).ledger_workers)
    assert confirm_latency.make_run_workers({"FRONTDOOR_LEDGER_WORKERS": "1"}) == 1
    assert confirm_latency.make_run_workers({"FRONTDOOR_LEDGER_WORKERS": "3"}) == 3
    assert confirm_latency.parse_args(["--workers", "1"]).workers == 1
    with pytest.raises(SystemExit):
        confirm_latency.parse_args(["--warmup", "-1"])
    args = delivery_throughput.parse_args([])
    assert (args.rate, args.backlog) == (500.0, 100_000)  # #13 §3: lag at 500/s, a 100,000-message backlog
    assert delivery_throughput.parse_args(["--quick"]).backlog == 1000
    with pytest.raises(SystemExit):
        delivery_throughput.parse_args(["--rate", "0"])


def test_the_receiver_checks_standard_webhooks_signatures() -> None:
    from frontdoor_webhooks.signing import new_secret, webhook_headers

    from bench import _receiver

    secret, body = new_secret(), b'{"data":{"idempotency_key":"op_1"}}'
    headers = webhook_headers([secret], "msg_1", int(time.time()), body)
    key = _receiver._secret_bytes(secret)
    assert _receiver.signature_ok(key, headers, body)
    assert not _receiver.signature_ok(key, headers, body + b" ")
    assert not _receiver.signature_ok(_receiver._secret_bytes(new_secret()), headers, body)
    assert _receiver._idempotency_key(body) == "op_1"


def test_the_receiver_process_counts_deliveries_per_webhook_id() -> None:
    import httpx

    from bench._receiver import ReceiverProcess

    receiver = ReceiverProcess()
    try:
        for msg_id, key in (("msg_1", "k1"), ("msg_1", "k1"), ("msg_2", "k2")):
            httpx.post(receiver.hook_url("x"), content=b'{"data":{"idempotency_key":"%s"}}' % key.encode(),
                       headers={"webhook-id": msg_id}).raise_for_status()
        stats = receiver.stats("x")
        assert (stats["raw"], stats["distinct_ids"], stats["performs"]) == (3, 2, 2)
        assert stats["keys_with_several_ids"] == []
    finally:
        receiver.stop()


def test_conversation_fanout_flags_and_summary_line() -> None:
    from bench import conversation_fanout

    args = conversation_fanout.parse_args([])
    assert (args.agents, args.rate, args.quick) == (1000, 50.0, False)
    assert conversation_fanout.parse_args(["--quick"]).quick
    fanout = {"fanout": _common.summarize([0.010, 0.030]), "empty_round_trip": _common.summarize([0.001, 0.002]),
              "agents": 2, "woken": 2}
    line = run_all.fanout_line(fanout)
    assert "2 long polls" in line and "woken 2/2" in line and "x at p99" in line
