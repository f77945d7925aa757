"""`scripts/bench-peers --jobrun-only` runs end to end, so the benchmark cannot rot.

Only its jobrun half, at tiny sizes: the peers need a throwaway venv from PyPI, too
slow for the suite. Nothing here is timed; the script's own checks (every job enqueued
and done, counted in the database) are what must pass.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parents[2]


def test_bench_peers_jobrun_half_runs_and_verifies_every_sample(pg_admin_url: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBRUN_")}
    env["JOBRUN_DATABASE_URL"] = pg_admin_url
    result = subprocess.run(
        [
            sys.executable, str(ROOT / "scripts" / "bench-peers"), "--quick", "--rounds", "1",
            "--jobrun-only", "--jobs", "200", "--wake-samples", "3",
            "--jobrun-concurrency", "", "--callback-concurrency", "20",
        ],
        capture_output=True, text=True, env=env, timeout=600, cwd=ROOT,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    for step in ("jobrun enqueue single", "jobrun enqueue batch_1000", "jobrun wake-up p50",
                 "jobrun no-op defaults", "jobrun callback c20", "jobrun no-op processes 2",
                 "jobrun callback processes 2", "jobrun Effect c20",
                 "jobrun Effect processes 2", "summary:"):  # fmt: skip
        assert step in result.stdout, result.stdout
    # The test server runs on this machine (embedded, or the CI host's own), so
    # the server's CPU per job is read for every sample.
    assert "server CPU/job, batch enqueue (calls of 1,000)" in result.stdout, result.stdout
    assert "worker process CPU/job, no-op processing (defaults)" in result.stdout, result.stdout
    # The floors need pgbench, which comes with PostgreSQL's own packages (CI's
    # machine has them); a machine without it is told so instead.
    if shutil.which("pgbench"):
        for step in ("floor one-row insert", "floor jobrun statement",
                     "server CPU/job, single-enqueue statement from pgbench"):  # fmt: skip
            assert step in result.stdout, result.stdout
    else:
        assert "floors: pgbench is not on PATH" in result.stdout, result.stdout
    assert "floor jobrun batch statements" in result.stdout, result.stdout


def _bench_peers_module() -> Any:
    loader = importlib.machinery.SourceFileLoader(
        "bench_peers", str(ROOT / "scripts" / "bench-peers")
    )
    spec = importlib.util.spec_from_loader("bench_peers", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    # Its dataclasses resolve their annotations through sys.modules.
    sys.modules[spec.name] = module
    try:
        loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module


def test_cpu_budget_sets_each_target_against_the_cpu_jobrun_spent() -> None:
    bench = _bench_peers_module()
    sample = bench.Sample
    results = {
        "pgqueuer no-op batch 500": [sample(20_000.0, {"server_cpu": 22e-6, "client_cpu": 31e-6})],
        "jobrun no-op c1000": [sample(25_000.0, {"server_cpu": 30e-6, "client_cpu": 25e-6})],
        "pgqueuer enqueue batch_1000": [sample(50_000.0)],
        "jobrun enqueue batch_1000": [sample(40_000.0, {"server_cpu": 12.5e-6})],
    }
    lines = bench.budget_lines(results, cores=2)
    # 1.4x of 20,000/s on 2 cores leaves 71 us a job; 30 + 25 = 55 us caps the rate at
    # 2 / 55 us = 36,364/s, 1.82x. A batch job may take 20 us; the server's 12.5 us
    # alone caps it at 80,000/s, 1.60x.
    assert lines == [
        "no-op, jobrun best tuned >= 1.4x: needs 28,000 jobs/s, which leaves 71 us of CPU per "
        "job on 2 cores; jobrun spends 30 (server) + 25 (worker) = 55 us (pgqueuer no-op batch "
        "500 spends 53), so at most 1.82x here",
        "enqueue_batch, calls of 1,000 >= 1x: needs 50,000 jobs/s, 20.0 us a job on one "
        "connection; the server alone spends 12.5 us, so at most about 1.60x with no client "
        "work at all",
    ]


def test_bench_ab_runs_both_sides_and_reports_each_step(pg_admin_url: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBRUN_")}
    env["JOBRUN_DATABASE_URL"] = pg_admin_url
    result = subprocess.run(
        [
            sys.executable, str(ROOT / "scripts" / "bench-ab"), "--a", ".",
            "--b", ".:handoff=false,claim_ahead=0s", "--rounds", "2", "--",
            "--quick", "--jobs", "100", "--wake-samples", "2", "--jobrun-concurrency", "",
            "--callback-concurrency", "", "--jobrun-processes", "",
        ],
        capture_output=True, text=True, env=env, timeout=900, cwd=ROOT,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "B = .:handoff=false,claim_ahead=0s" in result.stdout, result.stdout
    report = result.stdout.split("\nA = ", 1)[1]
    for step in ("jobrun enqueue single", "jobrun wake-up p50", "jobrun no-op defaults"):
        line = next(ln for ln in report.splitlines() if ln.startswith(step))
        assert line.count(".") >= 4 and "median" in line, line  # two rounds, two ratios


def test_a_bench_peers_setting_reaches_every_jobrun_process(monkeypatch: Any) -> None:
    bench = _bench_peers_module()
    monkeypatch.setenv("JOBRUN_CONCURRENCY", "7")  # a stray setting of the caller's: dropped
    monkeypatch.setenv(bench.SETTINGS_VARIABLE, "JOBRUN_HANDOFF=false;JOBRUN_CLAIM_AHEAD=0s")
    env = bench.child_env()
    assert env["JOBRUN_HANDOFF"] == "false" and env["JOBRUN_CLAIM_AHEAD"] == "0s"
    assert "JOBRUN_CONCURRENCY" not in env


def test_bench_ab_reports_cpu_per_job_as_steps_of_their_own(pg_admin_url: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBRUN_")}
    env["JOBRUN_DATABASE_URL"] = pg_admin_url
    result = subprocess.run(
        [
            sys.executable, str(ROOT / "scripts" / "bench-ab"), "--a", ".", "--b", ".",
            "--rounds", "1", "--",
            "--quick", "--jobs", "100", "--wake-samples", "2", "--jobrun-concurrency", "",
            "--callback-concurrency", "", "--jobrun-processes", "",
        ],
        capture_output=True, text=True, env=env, timeout=900, cwd=ROOT,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    report = result.stdout.split("\nA = ", 1)[1].splitlines()
    for step in (
        "jobrun enqueue single client CPU",
        "jobrun no-op defaults server CPU",
        "jobrun no-op defaults worker CPU",
    ):
        line = next((ln for ln in report if ln.startswith(step)), None)
        assert line is not None and " us " in line and "median" in line, (step, report)


def test_bench_mechanisms_compares_each_mechanism_in_pairs(pg_admin_url: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBRUN_")}
    env["JOBRUN_DATABASE_URL"] = pg_admin_url
    env["PYTHONPATH"] = str(ROOT / "src")
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench-mechanisms"), "--pairs", "2"],
        capture_output=True, text=True, env=env, timeout=600, cwd=ROOT,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    for name in (
        "control: single enqueue, A/A", "control: no-op drain, A/A",
        "control: enqueue_batch of 1,000, A/A",
        "one_exchange: single enqueue", "one_exchange: no-op drain",
        "copy_rows: enqueue_batch of 1,000", "copy_slices: enqueue_batch of 1,000",
        "events_first: enqueue_batch of 1,000", "payload_encoder: enqueue_batch of 1,000",
        "gc_tuning: no-op drain",
        "gc_tuning: enqueue_batch of 1,000",
        "claim_ahead: no-op drain", "handoff: idle worker, enqueue to handler entry",
    ):  # fmt: skip
        assert f"\n{name}: A = as is, B = " in result.stdout, (name, result.stdout)
    medians = [ln for ln in result.stdout.splitlines() if "B/A median" in ln]
    assert len(medians) == 25, result.stdout  # two metrics per sample, one for the wake-up
    with psycopg.connect(pg_admin_url) as conn:
        left = conn.execute(
            "SELECT count(*) FROM pg_database WHERE datname LIKE 'jobrun_mech_%'"
        ).fetchone()
    assert left == (0,), "the benchmark's databases are dropped"


def test_bench_scale_drains_both_databases_and_reports_the_ratios(pg_admin_url: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBRUN_")}
    env["JOBRUN_DATABASE_URL"] = pg_admin_url
    env["PYTHONPATH"] = str(ROOT / "src")
    result = subprocess.run(
        [
            sys.executable, str(ROOT / "scripts" / "bench-scale"), "--history", "5k",
            "--rounds", "1", "--jobs", "300",
        ],
        capture_output=True, text=True, env=env, timeout=600, cwd=ROOT,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    for what in ("drain, defaults", "drain, tuned", "buffers per job, tuned", "WAL per job, tuned",
                 "claim of 100 due jobs, p50", "completion of 100 jobs, p50",
                 "idle claim of 100, p50", "vs 44 rows"):  # fmt: skip
        line = next((ln for ln in result.stdout.splitlines() if what in ln), None)
        assert line is not None and " x" in line, (what, result.stdout)
    with psycopg.connect(pg_admin_url) as conn:
        left = conn.execute(
            "SELECT count(*) FROM pg_database WHERE datname LIKE 'jobrun_bench_scale_%'"
        ).fetchone()
    assert left == (0,), "the benchmark's databases are dropped"
