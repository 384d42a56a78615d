"""Real servers for tests, started on 127.0.0.1 by the tests themselves and stopped afterwards.

PostgreSQL: the Debian server binaries (installed by ``scripts/setup``) in a throwaway data directory.
Kafka: the noida-db broker from PyPI (a development broker that speaks the Kafka protocol).
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def postgres_binaries() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else None


@contextmanager
def postgres_server(password: str | None = None) -> Iterator[str]:
    """A fresh PostgreSQL server; yields the URL of its ``postgres`` database (user postgres). Without ``password``
    it trusts every client; with one, TCP clients must log in with it (scram-sha-256), so a wrong password fails."""
    binaries = postgres_binaries()
    if binaries is None:
        raise RuntimeError("PostgreSQL server binaries not found (scripts/setup installs them with apt-get as root)")
    base = Path(tempfile.mkdtemp(prefix="sparkcep-pg-"))
    data, port = base / "data", free_port()
    auth = ["--auth=trust"]
    if password is not None:
        password_file = base / "password"
        password_file.write_text(password + "\n")
        auth = ["--auth-local=trust", "--auth-host=scram-sha-256", f"--pwfile={password_file}"]
    as_user: list[str] = []
    if os.geteuid() == 0:  # initdb refuses to run as root
        for owned in base.iterdir():
            shutil.chown(owned, "postgres")
        shutil.chown(base, "postgres")
        # runuser lives in /usr/sbin, which a non-login shell's PATH may lack.
        runuser = shutil.which("runuser", path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin") or "runuser"
        as_user = [runuser, "-u", "postgres", "--"]
    try:
        subprocess.run([*as_user, str(binaries / "initdb"), "-D", str(data), "-U", "postgres", *auth,
                        "-E", "UTF8", "--no-sync"], check=True, capture_output=True)  # fmt: skip
        options = f"-c listen_addresses=127.0.0.1 -p {port} -k {base} -c fsync=off"
        subprocess.run([*as_user, str(binaries / "pg_ctl"), "-D", str(data), "-o", options, "-w", "-l",
                        str(base / "log"), "start"], check=True, capture_output=True)  # fmt: skip
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([*as_user, str(binaries / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
                       check=False, capture_output=True)  # fmt: skip
        shutil.rmtree(base, ignore_errors=True)


def fresh_database(server_url: str) -> str:
    """A new empty database on the server; returns its URL."""
    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")  # type: ignore[arg-type]  # generated name
    return server_url.rsplit("/", 1)[0] + f"/{name}"


@contextmanager
def kafka_broker() -> Iterator[str]:
    """A noida-db broker speaking the Kafka protocol; yields ``host:port``."""
    import noida_db

    binary = Path(noida_db.__file__).parent / "noida-db"
    base = Path(tempfile.mkdtemp(prefix="sparkcep-kafka-"))
    port = free_port()
    process = subprocess.Popen(
        [str(binary), "start", "--data-dir", str(base / "data"), "--host", "127.0.0.1", "--only", "kafka",
         "--kafka-port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("the Kafka-protocol broker did not start") from None
                time.sleep(0.1)
        yield f"127.0.0.1:{port}"
    finally:
        process.kill()
        process.wait()
        shutil.rmtree(base, ignore_errors=True)
