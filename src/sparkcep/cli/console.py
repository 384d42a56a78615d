"""``sparkcep console``: serve the operations console (HTTP API and web page) with uvicorn.

Attach with ``main.add_command(console)``. FastAPI and uvicorn are imported only when the command runs, so the
rest of the CLI works without the ``console`` extra.

The port is bound before anything is printed: a URL with a fresh token for a port another console holds would
open the other console, with a token it does not know.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import socket
from pathlib import Path
from typing import TYPE_CHECKING

import click

from sparkcep.errors import EnvironmentProblem, SparkcepError
from sparkcep.timeutil import parse_duration

if TYPE_CHECKING:
    from fastapi import FastAPI

DEFAULT_TOKEN_ENV = "SPARKCEP_CONSOLE_TOKEN"  # noqa: S105  # the name of a variable, not a secret
_BACKLOG = 2048  # uvicorn's default
_WILDCARD_SHOWN = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}  # noqa: S104  # names, not a bind


def _duration(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return parse_duration(value)
    except SparkcepError as exc:
        raise click.BadParameter(str(exc)) from None


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _shown(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def console_url(host: str, port: int, token: str | None) -> str:
    return f"http://{_shown(host)}:{port}/" + (f"#token={token}" if token else "")


def listen(host: str, port: int) -> list[socket.socket]:
    """Listening sockets on every address of ``host`` (127.0.0.1 and ::1 for ``localhost``), as uvicorn would
    bind them; port 0 takes a free port. Raises EnvironmentProblem naming the address and the fix."""
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise EnvironmentProblem(
            f"--host {host}: not an address or name of this machine ({exc.strerror}). Fix: give --host an address "
            "of this machine: 127.0.0.1 (the default), or 0.0.0.0 for every interface"
        ) from None
    bound: list[socket.socket] = []
    for family, kind, proto, _, address in addresses:
        sock = socket.socket(family, kind, proto)
        try:
            # As uvicorn does: a restart is not refused for connections of the previous run in TIME_WAIT (a
            # listener still on the port is refused all the same).
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind((address[0], bound[0].getsockname()[1] if bound else port, *address[2:]))
            sock.listen(_BACKLOG)
        except OSError as exc:
            sock.close()
            # One family missing (no IPv6 on this machine) is fine as long as another address was bound.
            if exc.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT) and len(addresses) > 1:
                continue
            for other in bound:
                other.close()
            raise EnvironmentProblem(_bind_problem(host, port, exc)) from exc
        bound.append(sock)
    if not bound:
        raise EnvironmentProblem(_bind_problem(host, port, OSError(errno.EADDRNOTAVAIL, "no address to bind")))
    return bound


def _bind_problem(host: str, port: int, exc: OSError) -> str:
    where = f"{_shown(host)}:{port}"
    if exc.errno == errno.EADDRINUSE:
        return (
            f"{where} is already in use: another program listens there (perhaps another sparkcep console). "
            "Fix: start with --port <another port>, or stop the other console"
        )
    if exc.errno in (errno.EACCES, errno.EPERM):
        return (
            f"{where}: no permission to listen there (ports below 1024 need privileges). "
            "Fix: start with --port 1024 or above"
        )
    if exc.errno == errno.EADDRNOTAVAIL:
        return (
            f"{where}: {host} is not an address of this machine. Fix: give --host an address of this machine: "
            "127.0.0.1 (the default), or 0.0.0.0 for every interface"
        )
    return f"cannot listen on {where}: {exc.strerror or exc}. Fix: start with another --host or --port"


def serve(app: FastAPI, listeners: list[socket.socket]) -> None:
    """Serve ``app`` on the sockets :func:`listen` bound, until Ctrl+C."""
    import uvicorn

    uvicorn.Server(uvicorn.Config(app, log_level="info")).run(sockets=listeners)


@click.command("console")
@click.option(
    "--config",
    "config_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="The pipeline file of `sparkcep run --config`: rule store, output, checkpoint, input and alert store. "
    "Options given as well override it.",
)
@click.option("--store", "store_spec", default=None, help="Rule store: sqlite:PATH, file:PATH, postgresql://...")
@click.option("--rules", "rules_file", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="The job's rule file (a job run with --rules): its rules shown read-only.")  # fmt: skip
@click.option("--output", "output_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="The job's output directory (alerts, _errors/).")  # fmt: skip
@click.option("--checkpoint", "checkpoint_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="The job's checkpoint (batch metrics).")  # fmt: skip
@click.option("--input", "input_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="History for back-tests: JSON-lines files like the job's input.")  # fmt: skip
@click.option("--alerts", "alerts_url", default=None,
              help="Read alerts from this PostgreSQL alert store instead of --output.")  # fmt: skip
@click.option("--watermark-delay", callback=_duration, default=None,
              help="Allowed out-of-orderness in back-tests (default: the config's, else 5s).")  # fmt: skip
@click.option("--host", default="127.0.0.1", show_default=True, help="Bind address.")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True,
              help="Port (checked before anything is printed; 0: a free one).")  # fmt: skip
@click.option("--token-env", default=DEFAULT_TOKEN_ENV, show_default=True,
              help="Environment variable with the token; unset: a random token is printed once.")  # fmt: skip
@click.option("--public-read", is_flag=True, default=False,
              help="Reads (rules, alerts, health, metrics) without the token; changes still need it.")  # fmt: skip
@click.option("--allowed-host", "allowed_hosts", multiple=True, metavar="NAME[:PORT]",
              help="A Host name to answer besides the bound address (a proxy's or DNS name). Repeatable.")  # fmt: skip
def console(
    config_path: Path | None,
    store_spec: str | None,
    rules_file: Path | None,
    output_dir: Path | None,
    checkpoint_dir: Path | None,
    input_dir: Path | None,
    alerts_url: str | None,
    watermark_delay: int | None,
    host: str,
    port: int,
    token_env: str,
    public_read: bool,
    allowed_hosts: tuple[str, ...],
) -> None:
    """Serve the operations console: rules with their state and history, editing with validation, back-tests,
    live alerts with explanations, and job health."""
    try:
        import uvicorn  # noqa: F401  # here, to name the missing extra before anything else

        from sparkcep.console import ConsoleSettings, create_app, settings_from_config
        from sparkcep.console.auth import new_token
        from sparkcep.console.security import parse_allowed_hosts
        from sparkcep.console.settings import override
    except ImportError as exc:
        raise click.ClickException(
            f"the console needs FastAPI and uvicorn: pip install 'sparkcep[console]' ({exc})"
        ) from exc

    try:
        parse_allowed_hosts(allowed_hosts)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--allowed-host") from None
    given_token = os.environ.get(token_env, "")
    token = given_token or new_token()
    try:
        settings = settings_from_config(config_path, token) if config_path else ConsoleSettings(token=token)
        settings = override(
            settings, store=store_spec, rules_file=rules_file, output_dir=output_dir, checkpoint_dir=checkpoint_dir,
            input_dir=input_dir, alerts_url=alerts_url, watermark_delay_ms=watermark_delay,
            public_read=public_read or None, allowed_hosts=allowed_hosts or None,
        )  # fmt: skip
        app = create_app(settings)
    except SparkcepError as exc:
        raise click.ClickException(str(exc)) from exc
    try:
        listeners = listen(host, port)
    except EnvironmentProblem as exc:
        # What and the fix, two lines, no trace to keep: nothing failed inside sparkcep.
        raise click.ClickException(str(exc).replace(" Fix: ", "\nFix: ", 1)) from None
    port = int(listeners[0].getsockname()[1])
    # A wildcard bind is opened here by loopback: a browser sends "Host: 0.0.0.0", which names no interface.
    shown = _WILDCARD_SHOWN.get(host, host)
    if given_token:
        click.echo(f"sparkcep console: {console_url(shown, port, None)} (token from ${token_env})")
    else:
        # Printed once, here: the page reads it from the URL fragment, which never reaches the server's logs.
        click.echo(f"sparkcep console: {console_url(shown, port, token)}")
    if not _is_loopback(host):
        exposed = (
            "anyone who can reach it can read rules and alerts (--public-read)"
            if settings.public_read
            else "the token crosses the network in clear text unless a TLS proxy is in front"
        )
        click.echo(f"warning: bound to {host}: {exposed}; other host names need --allowed-host", err=True)
    serve(app, listeners)
