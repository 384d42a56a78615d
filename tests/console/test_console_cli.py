"""``sparkcep console``: its options, the address it binds by default, and how it hands out the token.

Binding and serving are replaced by a recorder, so these tests check what the command would serve without a
socket; tests/console/test_console_security.py runs the command for real on a port that is taken.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner

from sparkcep.cli import main
from sparkcep.cli.console import DEFAULT_TOKEN_ENV
from sparkcep.console import ConsoleSettings

if TYPE_CHECKING:
    from fastapi import FastAPI
from sparkcep.store import open_store


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The address the command would listen on and the app it would serve, instead of binding and serving."""
    from sparkcep.cli import console as command

    calls: list[dict[str, Any]] = []

    def listen(host: str, port: int) -> list[Any]:
        calls.append({"host": host, "port": port})
        return [FakeSocket(host, port)]

    def serve(app: FastAPI, listeners: list[Any]) -> None:
        calls[-1]["app"] = app

    monkeypatch.setattr(command, "listen", listen)
    monkeypatch.setattr(command, "serve", serve)
    monkeypatch.delenv(DEFAULT_TOKEN_ENV, raising=False)
    return calls


class FakeSocket:
    def __init__(self, host: str, port: int) -> None:
        self.address = (host, port)

    def getsockname(self) -> tuple[str, int]:
        return self.address


def settings_of(call: dict[str, Any]) -> ConsoleSettings:
    settings = call["app"].state.console.settings
    assert isinstance(settings, ConsoleSettings)
    return settings


def test_help_lists_every_option() -> None:
    result = CliRunner().invoke(main, ["console", "--help"])
    assert result.exit_code == 0, result.output
    for option in ("--config", "--store", "--output", "--checkpoint", "--input", "--alerts", "--watermark-delay",
                   "--host", "--port", "--token-env", "--public-read", "--allowed-host"):  # fmt: skip
        assert option in result.output
    assert "127.0.0.1" in result.output
    assert "console" in CliRunner().invoke(main, ["--help"]).output


def test_binds_to_loopback_by_default_and_prints_a_fresh_token_once(
    served: list[dict[str, Any]], tmp_path: Path
) -> None:
    store = f"sqlite:{tmp_path / 'rules.db'}"
    open_store(store)  # the console reads an existing store
    result = CliRunner().invoke(main, ["console", "--store", store, "--output", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    [call] = served
    assert (call["host"], call["port"]) == ("127.0.0.1", 8765)
    settings = settings_of(call)
    assert (settings.store, settings.output_dir, settings.checkpoint_dir) == (store, tmp_path / "out", None)
    assert len(settings.token) >= 32
    # The URL carries the token in its fragment, which browsers never send to the server.
    assert f"http://127.0.0.1:8765/#token={settings.token}" in result.stdout
    assert result.output.count(settings.token) == 1
    assert "warning" not in result.output
    # Another start, another token.
    CliRunner().invoke(main, ["console", "--store", store])
    assert settings_of(served[1]).token != settings.token


def test_a_token_from_the_environment_is_never_printed(served: list[dict[str, Any]]) -> None:
    given = "from-env-1234"
    result = CliRunner().invoke(main, ["console", "--token-env", "MY_TOKEN"], env={"MY_TOKEN": given})
    assert result.exit_code == 0, result.output
    assert settings_of(served[0]).token == given
    assert given not in result.output and "$MY_TOKEN" in result.output


def test_another_address_must_be_asked_for_and_is_warned_about(served: list[dict[str, Any]]) -> None:
    result = CliRunner().invoke(main, ["console", "--host", "0.0.0.0", "--port", "9000"])  # noqa: S104  # the test
    assert result.exit_code == 0, result.output
    assert (served[0]["host"], served[0]["port"]) == ("0.0.0.0", 9000)  # noqa: S104
    assert "warning: bound to 0.0.0.0" in result.stderr


def test_options_override_the_pipeline_file_and_bad_sources_fail_at_start(
    served: list[dict[str, Any]], tmp_path: Path
) -> None:
    config = tmp_path / "pipeline.yaml"
    config.write_text(
        f"source: {{type: files, path: events}}\nrules: {{store: 'sqlite:{tmp_path / 'rules.db'}'}}\n"
        "sinks: {files: out}\ncheckpoint: ck\nwatermark_delay: 30s\n",
        encoding="utf-8",
    )
    open_store(tmp_path / "rules.db")
    result = CliRunner().invoke(main, ["console", "--config", str(config), "--watermark-delay", "2s"])
    assert result.exit_code == 0, result.output
    settings = settings_of(served[0])
    assert (settings.checkpoint_dir, settings.input_dir) == (tmp_path / "ck", tmp_path / "events")
    assert settings.store == f"sqlite:{tmp_path / 'rules.db'}"
    assert settings.watermark_delay_ms == 2_000
    bad = CliRunner().invoke(main, ["console", "--store", "nosuch:thing"])
    assert bad.exit_code != 0 and "nosuch:thing" in bad.output and len(served) == 1
    worse = CliRunner().invoke(main, ["console", "--watermark-delay", "soon"])
    assert worse.exit_code == 2 and "--watermark-delay" in worse.output
