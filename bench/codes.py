"""Which sparkcep code a benchmark runs: a git revision's sources or this checkout's, chosen by PYTHONPATH.

The package is installed editable through a plain ``.pth`` path, so ``PYTHONPATH=<tree>/src`` wins over it and
one virtualenv runs any revision. Nothing here imports sparkcep: a harness can pick which sources it imports
itself only after a baseline is checked out.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Code:
    """Which code runs: a name, the PYTHONPATH that selects its sources, and extra ``run`` options."""

    name: str
    pythonpath: str
    options: tuple[str, ...] = ()

    def has(self, module_file: Path) -> bool:
        """Whether this code's sources hold ``module_file`` (a path such as ``sparkcep/testing/__main__.py``):
        what a baseline older than this checkout can run of this checkout's scripts."""
        roots = [Path(entry) for entry in self.pythonpath.split(os.pathsep) if entry]
        return any((root / module_file).is_file() for root in roots)


# Where this checkout's bench scripts read a run's outputs from: a baseline without it has the older layout.
HARNESS_MODULE = Path("sparkcep") / "runfiles" / "outputs.py"


def environment(code: Code) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = code.pythonpath
    return env


# The compiled engine (sparkcep.native): a code without it runs the Python files only.
NATIVE_MODULE = Path("sparkcep") / "native.py"
_COMPILED = "sparkcep.native: compiled modules in use"


def engine(code: Code) -> str:
    """Which engine ``code``'s runs use, after building its compiled modules where it has them (once per digest of
    its sources; an edited engine module needs a build of its own): ``compiled``, or ``Python files`` and why.
    A check whose two codes ran different engines would measure the build, not the change: the report says so."""
    if not code.has(NATIVE_MODULE):
        return "Python files (no sparkcep.native in this code)"
    env = environment(code)
    built = subprocess.run([sys.executable, "-m", "sparkcep.native_build"], env=env, capture_output=True, text=True,
                           check=False)  # fmt: skip
    status = subprocess.run([sys.executable, "-m", "sparkcep.native_build", "--status"], env=env,
                            capture_output=True, text=True, check=False)  # fmt: skip
    said = status.stdout.strip()
    if said.startswith(_COMPILED):
        return "compiled"
    failure = (built.stderr.strip().splitlines() or [""])[-1]
    return f"Python files ({said or status.stderr.strip()[-300:]}{'; ' + failure if failure else ''})"


def baseline_worktree(revision: str, workdir: Path) -> Path:
    """A detached git worktree of ``revision`` at ``WORKDIR/baseline-<short sha>``, added once and reused."""
    sha = git("rev-parse", "--short", "--verify", f"{revision}^{{commit}}")
    tree = workdir / f"baseline-{sha}"
    if not tree.exists():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-f", str(tree), sha], check=True)
    elif git("-C", str(tree), "rev-parse", "--short", "HEAD") != sha:
        raise SystemExit(f"{tree} is not at {sha}: move it away or choose another work directory")
    return tree


def git(*args: str) -> str:
    """The output of a git command run in this checkout (``-C`` in ``args`` moves it elsewhere)."""
    done = subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True, text=True)
    return done.stdout.strip()
