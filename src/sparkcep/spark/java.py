"""Find a Java runtime Spark 4.3 can use (17 or 21) before a JVM start fails with a cryptic error."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass

from sparkcep.errors import EnvironmentProblem

SUPPORTED = (17, 21)
INSTALL_HINT = (
    "Install Java 17 or 21, for example on Debian/Ubuntu: 'apt-get install -y openjdk-17-jre-headless', "
    "then make sure 'java' is on PATH or JAVA_HOME points at it."
)


@dataclass(frozen=True)
class JavaRuntime:
    executable: str
    major: int
    version_text: str


def parse_major(version_output: str) -> int | None:
    """The major version from ``java -version`` output (``"17.0.15"`` -> 17, ``"1.8.0_392"`` -> 8)."""
    match = re.search(r'version "(\d+)(?:\.(\d+))?', version_output)
    if match is None:
        return None
    major = int(match.group(1))
    if major == 1 and match.group(2) is not None:
        return int(match.group(2))
    return major


def find_java(env: dict[str, str] | None = None) -> JavaRuntime:
    """Locate ``java`` (``JAVA_HOME`` first, then PATH) and check its version; raise with a fix if unusable."""
    environ = os.environ if env is None else env
    candidates: list[str] = []
    home = environ.get("JAVA_HOME")
    if home:
        candidates.append(os.path.join(home, "bin", "java"))
    on_path = shutil.which("java", path=environ.get("PATH"))
    if on_path:
        candidates.append(on_path)
    if not candidates:
        raise EnvironmentProblem(f"Java was not found (no JAVA_HOME, no 'java' on PATH). {INSTALL_HINT}")
    problems: list[str] = []
    for executable in candidates:
        try:
            proc = subprocess.run([executable, "-version"], capture_output=True, text=True, timeout=60, check=False)
        except OSError as exc:
            problems.append(f"{executable}: {exc}")
            continue
        text = proc.stderr + proc.stdout
        major = parse_major(text)
        if major in SUPPORTED:
            assert major is not None
            return JavaRuntime(executable, major, text.strip().splitlines()[0])
        problems.append(f"{executable}: version {major if major is not None else 'unknown'}")
    raise EnvironmentProblem(
        f"Spark 4.3 needs Java {' or '.join(map(str, SUPPORTED))}; found: {'; '.join(problems)}. {INSTALL_HINT}"
    )
