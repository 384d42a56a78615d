"""Servers a command talks to: PostgreSQL (a refused login, an unreachable server and a timeout told apart) and
Kafka brokers."""

from __future__ import annotations

import re

from sparkcep.diagnose.verdict import Diagnosis, Where, again, lower_first, postgres_service

_PG_SERVER = re.compile(r'connection to server at "([^"]+)"(?: \([^)]*\))?, port (\d+) failed: ([^\n]+)')


_PG_SOCKET = re.compile(r'connection to server on socket "([^"]+)" failed: ([^\n]+)')


_PG_RESOLVE = re.compile(r"failed to resolve host '([^']+)'|could not translate host name \"([^\"]+)\"")


_PG_URL = re.compile(r"(rule store|alert store)? ?(postgres(?:ql)?://[^\s'\"]+?):? (?=\S)")


# psycopg's own connect timeout names no server ("connection timeout expired"): the URL in sparkcep's message
# around it does, with the wait (pg_url.connect, preflight.require_postgres).
_PG_TIMEOUT = re.compile(r"no answer within ([^\s:]+)(?: \((--connect-timeout)\))?")


_PG_QUOTED = re.compile(r'"([^"]*)"')


def postgres_rule(text: str, where: Where) -> Diagnosis | None:
    if "OperationalError" not in text and "psycopg" not in text:
        return None
    server, sock, resolve = _PG_SERVER.search(text), _PG_SOCKET.search(text), _PG_RESOLVE.search(text)
    timeout = _PG_TIMEOUT.search(text) if "timeout expired" in text else None
    if server is not None:
        address, reason = f"{server.group(1)}:{server.group(2)}", server.group(3).strip()
    elif sock is not None:
        address, reason = f"socket {sock.group(1)}", sock.group(2).strip()
    elif resolve is not None:
        address, reason = _postgres_address(text, where) or (resolve.group(1) or resolve.group(2)), "unknown host"
    elif timeout is not None or "timeout expired" in text:
        address, reason = _postgres_address(text, where) or "the server", "timeout expired"
    else:
        return None
    problem, fix = postgres_problem(address, _postgres_role(text, where), reason, timeout)
    return Diagnosis(problem, again(fix, where))


def postgres_problem(  # noqa: PLR0911  # one return per kind of refusal
    address: str, role: str, reason: str, timeout: re.Match[str] | None = None
) -> tuple[str, str]:
    """What went wrong connecting to PostgreSQL at ``address``, told apart: the server refused the login (password,
    role, database, pg_hba.conf), it cannot be reached (refused, unknown host), or it did not answer in time."""
    reason = reason.replace("FATAL:", "").strip()
    at = f"PostgreSQL at {address}{role}"
    host, _, port = address.rpartition(":")
    names = _PG_QUOTED.findall(reason)
    name = names[0] if names else "?"
    if "password authentication failed" in reason:
        return (
            f"{at} refused the login of user {name!r}: wrong password (or no such user)",
            "check the user name in the URL and give that user's password in PGPASSWORD or a ~/.pgpass line "
            f"({host}:{port}:DATABASE:{name}:PASSWORD)",
        )
    if "no password supplied" in reason:
        return (
            f"{at} asks for a password and none was given",
            f"set PGPASSWORD, or add a ~/.pgpass line ({host}:{port}:DATABASE:USER:PASSWORD, mode 0600)",
        )
    if reason.startswith("database ") and "does not exist" in reason:
        return (
            f"{at} has no database {name!r}",
            f"correct the database name at the end of the URL, or create it (createdb -h {host} -p {port} {name})",
        )
    if reason.startswith("role ") and "does not exist" in reason:
        return f"{at} has no role {name!r}", f"correct the user in the URL, or create it (CREATE ROLE {name} LOGIN)"
    if "no pg_hba.conf entry" in reason:
        return (
            f"{at} does not let this machine log in: {lower_first(reason)}",
            "ask the server's administrator for a pg_hba.conf entry for this host, user and database (or add "
            "sslmode=require to the URL if the entries ask for SSL)",
        )
    if "timeout expired" in reason:
        wait = "in time" if timeout is None else f"within {timeout.group(1)}"
        option = " (--connect-timeout)" if timeout is not None and timeout.group(2) else ""
        raise_it = ", or give it longer with --connect-timeout" if option else ""
        return (
            f"PostgreSQL at {address}{role} did not answer {wait}{option}",
            f"check that the server runs and that the network (a firewall) lets this machine reach port {port or '?'} "
            f"of {host or address} (pg_isready -h {host} -p {port}){raise_it}",
        )
    if reason == "unknown host":
        return f"cannot reach PostgreSQL at {address}{role}: unknown host", "correct the host name in the URL"
    fix = f"start PostgreSQL there or correct host and port in the URL (check: pg_isready -h {host} -p {port})"
    return f"cannot reach PostgreSQL at {address}{role}: {lower_first(reason)}", fix


def _postgres_address(text: str, where: Where) -> str | None:
    url = _PG_URL.search(text)
    if url is not None:
        return postgres_service(url.group(2), "").address
    known = where.of_kind("PostgreSQL")
    return known[0].address if len(known) == 1 else None


def _postgres_role(text: str, where: Where) -> str:
    url = _PG_URL.search(text)
    if url is not None and url.group(1):
        return f" ({url.group(1)})"
    known = where.of_kind("PostgreSQL")
    return f" ({known[0].role})" if len(known) == 1 else ""


_KAFKA_ERROR = re.compile(r'KafkaError\{code=(\w+),val=-?\d+,str="([^"]*)"\}')


_KAFKA_UNREACHABLE = ("_TRANSPORT", "_ALL_BROKERS_DOWN", "_RESOLVE", "_TIMED_OUT", "_MSG_TIMED_OUT", "_AUTHENTICATION")


def kafka_rule(text: str, where: Where) -> Diagnosis | None:
    match = _KAFKA_ERROR.search(text)
    if match is None or match.group(1) not in _KAFKA_UNREACHABLE:
        return None
    brokers = sorted({s.address for s in where.of_kind("Kafka")})
    subject = f"Kafka brokers {', '.join(brokers)}" if brokers else "the Kafka brokers"
    reason = match.group(2).rsplit(": ", 1)[-1].rstrip(".").lower() or match.group(1)
    if match.group(1) == "_AUTHENTICATION":
        fix = "check the SASL/SSL properties and the environment variables their env: values name"
    else:
        fix = "start the brokers or correct bootstrap_servers (and the security properties) in the pipeline file"
    return Diagnosis(f"cannot reach {subject}: {reason}", again(fix, where))
