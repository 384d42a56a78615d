"""``serve_metrics``: a small HTTP server answering ``GET /metrics`` for Prometheus, beside a running job
(``sparkcep run --metrics-port``). It reads the job's checkpoint like the console does, in its own thread.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import socket
import threading
from collections.abc import Iterable
from types import TracebackType
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server
from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

from sparkcep.errors import EnvironmentProblem
from sparkcep.storage import Location

from .collector import CheckpointCollector

DEFAULT_HOST = "127.0.0.1"  # loopback: the endpoint has no token, so others reach it only when asked to
METRICS_PATH = "/metrics"
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")


class MetricsServer:
    """A running metrics endpoint. :meth:`stop` (or leaving a ``with`` block) closes it and its thread."""

    def __init__(self, server: WSGIServer, registry: CollectorRegistry) -> None:
        self._server = server
        self.registry = registry
        self.host, self.port = str(server.server_address[0]), int(server.server_address[1])
        self._thread = threading.Thread(target=server.serve_forever, name="sparkcep-metrics", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{METRICS_PATH}"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def __enter__(self) -> MetricsServer:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """A scrape every few seconds would flood the job's output."""


def serve_metrics(checkpoint: str | os.PathLike[str] | Location, host: str, port: int) -> MetricsServer:
    """Serve the metrics of the job writing to ``checkpoint`` at ``http://host:port/metrics``, from a daemon
    thread, until :meth:`MetricsServer.stop`.

    Call it before the job starts: it binds at once and raises :class:`~sparkcep.errors.EnvironmentProblem`,
    naming ``host:port`` and the fix, when it cannot (the port is taken, the host is not an address here).
    ``port`` 0 takes a free port (``MetricsServer.port`` tells which). The endpoint has no token: keep ``host``
    on loopback (:data:`DEFAULT_HOST`) unless the network is trusted.
    """
    collector = CheckpointCollector(checkpoint)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    try:
        family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
        server_class = type("MetricsHTTPServer", (ThreadingWSGIServer,), {"address_family": family})
        app = _only_metrics(make_wsgi_app(registry), loopback=_is_loopback(str(address[0])))
        server: WSGIServer = make_server(host, port, app, server_class, _Quiet)
    except OSError as error:
        raise EnvironmentProblem(_bind_problem(host, port, error)) from None
    # The first read of a long-lived checkpoint's files takes seconds (100k batches): done now, while the job
    # starts, rather than in the first scrape, which Prometheus gives 10 s by default.
    threading.Thread(target=collector.warm_up, name="sparkcep-metrics-warmup", daemon=True).start()
    return MetricsServer(server, registry)


def _bind_problem(host: str, port: int, error: OSError) -> str:
    where = f"metrics endpoint {f'[{host}]' if ':' in host else host}:{port}"
    if error.errno == errno.EADDRINUSE:
        return f"{where} is already in use: another program listens there. Fix: give --metrics-port another port"
    if error.errno in (errno.EACCES, errno.EPERM):
        return f"{where}: no permission (ports below 1024 need privileges). Fix: give --metrics-port 1024 or above"
    return (
        f"{where}: cannot listen there ({error.strerror or error}): {host} is not an address of this machine? "
        "Fix: bind to 127.0.0.1 (the default), or 0.0.0.0 for every interface"
    )


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def _host_name(header: str) -> str:
    """``127.0.0.1:9108`` -> ``127.0.0.1``, ``[::1]:9108`` -> ``[::1]``."""
    if header.startswith("["):
        return header[: header.find("]") + 1].lower()
    return header.partition(":")[0].lower()


def _only_metrics(app: WSGIApplication, loopback: bool) -> WSGIApplication:
    """prometheus_client answers any path; this endpoint answers ``/metrics`` and a pointer to it at ``/``.

    On a loopback address it also refuses a request whose Host is not a loopback name (421): a web page whose
    name is made to resolve to 127.0.0.1 (DNS rebinding) cannot read the metrics from the operator's browser.
    """

    def routed(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        given = environ.get("HTTP_HOST")
        if loopback and given is not None and _host_name(given) not in LOOPBACK_NAMES:
            start_response("421 Misdirected Request", [("Content-Type", "text/plain; charset=utf-8")])
            return [f"Host {given!r} is not this machine: scrape 127.0.0.1 or localhost\n".encode()]
        if path == METRICS_PATH:
            return app(environ, start_response)
        found = path in ("", "/")
        start_response("200 OK" if found else "404 Not Found", [("Content-Type", "text/plain; charset=utf-8")])
        return [b"sparkcep metrics for Prometheus: GET /metrics\n"]

    return routed
