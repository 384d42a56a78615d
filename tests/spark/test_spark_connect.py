"""sparkcep.api from a Spark Connect client, against the Connect server that ships with PySpark.

One server for the module: ``spark-submit --class ...SparkConnectServer`` from the installed pyspark on a free
loopback port, local[2], with the settings a sparkcep session has (sparkcep.spark.session.base_conf: the RocksDB
state store provider, the worker daemon module) and the Python workers on this interpreter. Each scenario runs
in a client process of its own (tests/connect_client.py says why) and must give the oracle's records.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark
ROOT = Path(__file__).resolve().parents[2]
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), 0.5).close()
    except OSError:
        return False
    return True


@pytest.fixture(scope="module")
def connect_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``sc://127.0.0.1:PORT`` of a Connect server started for this module, stopped (by its process group) after."""
    import pyspark

    from sparkcep.spark.session import SparkSettings, base_conf

    home = Path(pyspark.__file__).resolve().parent
    submit = home / "bin" / "spark-submit"
    if not (home / "jars").glob("spark-connect_*.jar") or not submit.is_file():
        pytest.fail(f"the pip pyspark at {home} has no Connect server jar or spark-submit")
    port = free_port()
    conf = base_conf(SparkSettings(master="local[2]", shuffle_partitions=2, driver_memory="1g"))
    conf.update({"spark.connect.grpc.binding.address": "127.0.0.1", "spark.connect.grpc.binding.port": str(port)})
    command = [str(submit), "--master", "local[2]", "--class", SERVER_CLASS, "--name", "sparkcep-connect-test"]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "PYSPARK_PYTHON": sys.executable,  # workers with pyarrow, pandas and sparkcep
        "SPARK_LOCAL_IP": "127.0.0.1",
        # The server's Python workers unpickle sparkcep's functions and the tests' foreachBatch functions.
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests")]),
    }
    log_path = tmp_path_factory.mktemp("connect") / "server.log"
    with log_path.open("w") as log:
        server = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while not listening(port):
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the Connect server did not listen on {port}:\n{log_path.read_text()[-3000:]}")
            time.sleep(0.3)
        yield f"sc://127.0.0.1:{port}"
    finally:
        os.killpg(server.pid, 15)  # spark-submit's shell and the JVM it started
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, 9)
            server.wait(10)


def run_client(url: str, scenario: str, work: Path) -> dict[str, Any]:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("SPARK_CONNECT", "SPARK_REMOTE"))}
    done = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "connect_client.py"), url, scenario, str(work)],
        env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"{scenario} through Spark Connect failed:\n{done.stderr[-6000:]}"
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"{scenario} through Spark Connect: {found}")
    return found


def test_batch_detect_through_spark_connect(connect_url: str, tmp_path: Path) -> None:
    found = run_client(connect_url, "batch", tmp_path)
    assert found["session"] == "pyspark.sql.connect.session"  # a Connect client, not a classic session
    assert found["outputs"] > 10 and found["dead_letters"] == 1
    assert found["typed_records"] == found["outputs"]  # every record of the one rule, typed


def test_streaming_detect_into_the_memory_sink_through_spark_connect(connect_url: str, tmp_path: Path) -> None:
    found = run_client(connect_url, "stream", tmp_path)
    assert found["outputs"] > 10 and found["batches"] > 3


def test_a_rule_store_followed_through_spark_connect(connect_url: str, tmp_path: Path) -> None:
    found = run_client(connect_url, "store", tmp_path)
    assert found["versions"] == [["big-sum", 1], ["busy", 1], ["busy", 2], ["quiet-card", 1]]
