"""``sparkcep run`` as an operator sees it: JSON progress lines with the source's lag, the Spark UI's address, the
job's status file, its Prometheus endpoint while it runs, and the summary's figures."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from sparkcep.prometheus.collector import job_label
from sparkcep.simulate import generate_orders

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.spark


def run_cli(tmp_path: Path, *extra: str) -> tuple[dict[str, object], list[dict[str, object]]]:
    args = [
        sys.executable, "-m", "sparkcep.cli", "run", "--rules", str(ROOT / "examples" / "orders.rules.json"),
        "--input", str(tmp_path / "in"), "--output", str(tmp_path / "out"), "--checkpoint", str(tmp_path / "ck"),
        "--until-caught-up", "--log-format", "json", "--no-aligned-backfill", "--max-files-per-trigger", "1",
        "--buckets", "4", *extra,
    ]  # fmt: skip
    with socket.socket() as probe:  # a port free now, for the job's Prometheus endpoint
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    job = subprocess.Popen([*args, "--metrics-port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)  # fmt: skip
    # Every scrape after the first batch (the last ones may come as the job stops), of this job's samples.
    scraped: list[dict[tuple[str, str | None], float]] = []
    while job.poll() is None:  # scrape while it runs: the endpoint lives as long as the job
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
                text = answer.read().decode()
        except OSError:
            text = ""
        samples = {(s.name, s.labels.get("state")): s.value for f in text_string_to_metric_families(text)
                   for s in f.samples if s.labels.get("sparkcep_job") == job_label(tmp_path / "ck")}  # fmt: skip
        if samples.get(("sparkcep_batches_total", None), 0) > 0:
            scraped.append(samples)
        time.sleep(0.2)
    stdout, stderr = job.communicate(timeout=60)
    assert job.returncode == 0, stderr[-3000:]
    assert any(found.get(("sparkcep_job_state", "running")) == 1 for found in scraped), "a scrape after batch 0"
    events = [json.loads(text) for text in stderr.splitlines()]  # nothing but JSON lines on stderr
    return json.loads(stdout), events


def lines_in(directory: Path) -> int:
    return sum(len(path.read_text().splitlines()) for path in directory.glob("*.jsonl"))


def test_progress_lines_lag_status_and_a_summary_per_scope(tmp_path: Path) -> None:
    generate_orders(tmp_path / "in", 4_000, seed=5, files=3, mean_gap_ms=600_000)
    total = lines_in(tmp_path / "in")
    summary, events = run_cli(tmp_path, "--spark-ui")

    # "starting" from the first second (the Spark session takes 10-60 s), "start" once the query runs.
    assert [events[0]["event"], events[1]["event"], events[-1]["event"]] == ["starting", "start", "end"]
    spark_ui = events[1]["spark_ui"]
    assert isinstance(spark_ui, str) and spark_ui.startswith("http://")
    assert Path(str(events[1]["log"])).is_file()  # Spark's own output, out of the way
    assert summary["log"] == events[1]["log"] == events[0]["log"]
    batches = [e for e in events if e["event"] == "batch"]
    assert len(batches) >= 3, "a file per batch"
    read = 0
    for event in batches:  # one grouping, no blank lines: a record is a line
        read += int(event["records"])  # type: ignore[call-overload]
        assert read + int(event["lag_records"]) == total, event  # type: ignore[call-overload]
        assert event["lag"][0]["part"] == str(tmp_path / "in")  # type: ignore[index]
    first_lag = batches[0]["lag_event_time_ms"]
    assert isinstance(first_lag, int) and first_lag > 0 and batches[-1]["lag_event_time_ms"] == 0
    status = json.loads((tmp_path / "ck" / "sparkcep" / "status.json").read_text())
    assert status["state"] == "stopped" and status["spark_ui"] == spark_ui and status["bounded"] is True

    this_run = summary["this_run"]
    assert this_run == summary["checkpoint"]  # type: ignore[comparison-overlap]
    assert this_run["records"] == total and this_run["batches"] == len(batches)  # type: ignore[index]
    parts = ("used", "late", "duplicates", "refused", "skipped")
    assert this_run["records"] == sum(this_run[name] for name in parts)  # type: ignore[index,misc]
    assert summary["source"]["files_read"] == 3  # type: ignore[index]
    # The engine's speed over its busy time, beside the average over the run's wall time.
    busy, wall = summary["busy_s"], summary["wall_s"]
    assert isinstance(busy, float) and isinstance(wall, float) and 0 < busy <= wall
    assert summary["events_per_busy_s"] == pytest.approx(total / busy, rel=0.01)  # busy_s is rounded to ms
    assert all(e["events_per_s"] is None or e["events_per_s"] > 0 for e in batches)

    with pytest.raises(OSError):  # the UI went with the job
        urllib.request.urlopen(str(spark_ui), timeout=2)  # noqa: S310 - a loopback address the test made


def run_json(tmp_path: Path) -> tuple[dict[str, object], list[dict[str, object]]]:
    """A bounded ``sparkcep run`` with a JSON log: its summary and its log's events."""
    args = [
        sys.executable, "-m", "sparkcep.cli", "run", "--rules", str(ROOT / "examples" / "orders.rules.json"),
        "--input", str(tmp_path / "in"), "--output", str(tmp_path / "out"), "--checkpoint", str(tmp_path / "ck"),
        "--until-caught-up", "--log-format", "json", "--buckets", "4",
    ]  # fmt: skip
    job = subprocess.run(args, check=False, capture_output=True, text=True, timeout=600)
    assert job.returncode == 0, job.stderr[-3000:]
    return json.loads(job.stdout), [json.loads(text) for text in job.stderr.splitlines()]


def status_of(checkpoint: Path) -> dict[str, object]:
    found = subprocess.run([sys.executable, "-m", "sparkcep.cli", "status", "--checkpoint", str(checkpoint), "--json"],
                           check=False, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert found.returncode == 0, found.stderr
    report = json.loads(found.stdout)
    assert isinstance(report, dict)
    return report


def test_a_caught_up_restart_says_so_and_status_counts_what_came_since(tmp_path: Path) -> None:
    """Issue 29: a restart with nothing new runs no micro-batch, and says it is caught up (JSON log) before it
    ends; a stopped job's lag is the input a restart would read, measured from the checkpoint alone."""
    generate_orders(tmp_path / "in", 600, seed=7, files=2, mean_gap_ms=60_000)
    _, first = run_json(tmp_path)
    assert [e["event"] for e in first][:4] == ["starting", "start", "waiting", "lag"]
    assert first[2]["for"] == "first_batch"
    assert first[3]["lag_records"] == lines_in(tmp_path / "in")  # measured as the run starts, before any batch
    assert [e["event"] for e in first if e["event"] == "caught_up"] == ["caught_up"]

    summary, again = run_json(tmp_path)
    assert [e["event"] for e in again] == ["starting", "start", "waiting", "lag", "caught_up", "end"]
    assert again[3]["lag_records"] == 0 and summary["this_run"]["records"] == 0  # type: ignore[index]

    report = status_of(tmp_path / "ck")
    assert (report["state"], report["caught_up"], report["lag_records"]) == ("stopped", True, 0)
    assert str(report["why"]).startswith("stopped: caught up")
    assert report["source"] == {"type": "files", "path": str(tmp_path / "in")}

    generate_orders(tmp_path / "more", 250, seed=8, files=2, start_ms=1_704_153_600_000)
    added = sorted((tmp_path / "more").glob("*.jsonl"))
    for index, path in enumerate(added):  # renamed in whole, as writers are told to
        path.rename(tmp_path / "in" / f"zz-{index}-{path.name}")
    report = status_of(tmp_path / "ck")
    assert report["lag_records"] == sum(len(p.read_text().splitlines()) for p in (tmp_path / "in").glob("zz-*"))
    assert report["lag_bytes"] == sum(p.stat().st_size for p in (tmp_path / "in").glob("zz-*"))
    assert report["lag"][0]["position"] == "2 of 4 files read" and report["lag_files"] == 2  # type: ignore[index]
    assert report["caught_up"] is False and report["lag_measured"] == "now"
