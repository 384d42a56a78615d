"""Compiles the engine's hot modules with mypyc for :mod:`sparkcep.native` (``scripts/setup`` runs it).

    python -m sparkcep.native_build            # compile, unless a build of these sources exists
    python -m sparkcep.native_build --status   # whether this interpreter runs the compiled modules, or why not

Needs a C compiler, the Python headers and mypy (the development dependencies). A build goes into a directory named
by the sources' digest, written whole and renamed into place, so a process never sees half a build.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from sparkcep.native import (
    COMPLETE,
    MODULES,
    PACKAGE_ROOT,
    SUFFIX,
    digest,
    extension_paths,
    native_root,
    source_of,
)

_KEEP_BUILDS = 4  # builds kept, newest first: other checkouts sharing the environment have their own sources


def build(root: Path | None = None, package_root: Path = PACKAGE_ROOT) -> Path:
    """Compile the modules into ``root / digest`` unless that build exists; its path. Raises on failure."""
    root = root or native_root()
    target = root / digest(package_root)
    if extension_paths(target) is not None:
        os.utime(target)  # asked for now: the newest, so another checkout's build does not prune it (_prune)
        return target
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="sparkcep-native-") as work:
        tree = Path(work) / "src"
        # The whole package's sources (mypy follows the compiled modules' imports), no earlier build's files.
        skipped = shutil.ignore_patterns(f"*{SUFFIX}", "__pycache__")
        package = Path(__file__).resolve().parent.name  # the package directory, sparkcep
        shutil.copytree(package_root / package, tree / package, ignore=skipped)
        config = Path(work) / "mypy.ini"
        config.write_text("[mypy]\n", encoding="utf-8")  # not the project's strict settings: they are mypy's job
        files = [str(source_of(module, tree).relative_to(tree)) for module in MODULES]
        done = subprocess.run(
            [sys.executable, "-m", "mypyc", "--config-file", str(config), *files],
            cwd=tree, capture_output=True, text=True, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"mypyc failed ({done.returncode}):\n{done.stdout[-4000:]}{done.stderr[-4000:]}")
        staged = root / f".{target.name}.{os.getpid()}"
        shutil.rmtree(staged, ignore_errors=True)
        for built in tree.rglob(f"*{SUFFIX}"):
            if "build" in built.relative_to(tree).parts[:1]:
                continue  # setuptools' own copies
            destination = staged / built.relative_to(tree)
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(built, destination)
        (staged / COMPLETE).write_text(digest(package_root) + "\n", encoding="utf-8")
        if extension_paths(staged) is None:
            raise RuntimeError(f"mypyc built no complete set of modules in {staged}")
        try:
            staged.rename(target)
        except OSError:  # another build of the same sources finished first
            shutil.rmtree(staged, ignore_errors=True)
    _prune(root, keep=target)
    return target


def _prune(root: Path, keep: Path) -> None:
    """Remove all but the newest builds (other sources, left by other checkouts or earlier versions); a build is as
    new as the last :func:`build` that asked for it."""
    builds = sorted(
        (path for path in root.iterdir() if path.is_dir() and not path.name.startswith(".") and path != keep),
        key=lambda path: path.stat().st_mtime,
        reverse=True,
    )
    for old in builds[_KEEP_BUILDS - 1 :]:
        shutil.rmtree(old, ignore_errors=True)


def main(argv: Sequence[str]) -> int:
    if list(argv) == ["--status"]:
        from sparkcep.native import why_not

        reason = why_not()
        print(f"sparkcep.native: the Python files run: {reason}" if reason else
              f"sparkcep.native: compiled modules in use ({len(MODULES)} modules, {native_root()})")  # fmt: skip
        return 0
    if argv:
        print("usage: python -m sparkcep.native_build [--status]", file=sys.stderr)
        return 2
    try:
        print(f"sparkcep.native: compiled modules in {build()}")
    except (RuntimeError, OSError) as exc:
        print(f"sparkcep.native: not compiled, the Python files run ({exc})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
