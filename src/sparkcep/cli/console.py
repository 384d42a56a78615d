"""``sparkcep console``: serve the operations console (HTTP API and web page) with uvicorn.

Attach with ``main.add_command(console)``. FastAPI and uvicorn are imported only when the command runs, so the
rest of the CLI works without the ``console`` extra.
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

import click

from sparkcep.errors import SparkcepError
from sparkcep.timeutil import parse_duration

DEFAULT_TOKEN_ENV = "SPARKCEP_CONSOLE_TOKEN"  # noqa: S105  # the name of a variable, not a secret


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


def console_url(host: str, port: int, token: str | None) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/" + (f"#token={token}" if token else "")


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
@click.option("--host", default="127.0.0.1", show_default=True, help="Bind address (reads need no token).")
@click.option("--port", type=int, default=8765, show_default=True)
@click.option("--token-env", default=DEFAULT_TOKEN_ENV, show_default=True,
              help="Environment variable with the write token; unset: a random token is printed once.")  # fmt: skip
def console(
    config_path: Path | None,
    store_spec: str | None,
    output_dir: Path | None,
    checkpoint_dir: Path | None,
    input_dir: Path | None,
    alerts_url: str | None,
    watermark_delay: int | None,
    host: str,
    port: int,
    token_env: str,
) -> None:
    """Serve the operations console: rules with their state and history, editing with validation, back-tests,
    live alerts with explanations, and job health."""
    try:
        import uvicorn

        from sparkcep.console import ConsoleSettings, create_app, settings_from_config
        from sparkcep.console.auth import new_token
        from sparkcep.console.settings import override
    except ImportError as exc:
        raise click.ClickException(
            f"the console needs FastAPI and uvicorn: pip install 'sparkcep[console]' ({exc})"
        ) from exc

    given_token = os.environ.get(token_env, "")
    token = given_token or new_token()
    try:
        settings = settings_from_config(config_path, token) if config_path else ConsoleSettings(token=token)
        settings = override(
            settings, store=store_spec, output_dir=output_dir, checkpoint_dir=checkpoint_dir, input_dir=input_dir,
            alerts_url=alerts_url, watermark_delay_ms=watermark_delay,
        )  # fmt: skip
        app = create_app(settings)
    except SparkcepError as exc:
        raise click.ClickException(str(exc)) from exc
    if given_token:
        click.echo(f"sparkcep console: {console_url(host, port, None)} (write token from ${token_env})")
    else:
        # Printed once, here: the page reads it from the URL fragment, which never reaches the server's logs.
        click.echo(f"sparkcep console: {console_url(host, port, token)}")
    if not _is_loopback(host):
        click.echo(f"warning: bound to {host}: anyone who can reach it can read rules and alerts", err=True)
    uvicorn.run(app, host=host, port=port, log_level="info")
