"""``--record``: the report, dated, with its command line and the load average, appended to the section
"## bench/check history" at the end of bench/README.md (made when missing; newest entry last). Nothing else of
the file is touched."""

from __future__ import annotations

import time
from pathlib import Path

SECTION = "## bench/check history"
INTRO = (
    "Entries written by `bench/check --record` (baseline and current code side by side in one run, "
    "see bench/check.py); newest last."
)


def entry(command: str, load_start: tuple[float, ...], load_end: tuple[float, ...], context: str, body: str) -> str:
    loads = f"load average (1, 5, 15 min) {show(load_start)} at the start, {show(load_end)} at the end"
    return f"### {time.strftime('%Y-%m-%d')}: `{command}`\n\n{context}; {loads}.\n\n{body.strip()}\n"


def show(load: tuple[float, ...]) -> str:
    return " / ".join(f"{value:.2f}" for value in load)


def record(readme: Path, text: str) -> None:
    """Insert ``text`` at the end of the history section (before a later ``## `` heading, if any)."""
    lines = readme.read_text(encoding="utf-8").rstrip("\n").split("\n")
    if SECTION not in lines:
        lines += ["", SECTION, "", INTRO]
    start = lines.index(SECTION)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    before, after = lines[:end], lines[end:]
    while before and not before[-1].strip():
        before.pop()
    merged = [*before, "", *text.rstrip("\n").split("\n")]
    if after:
        merged += ["", *after]
    readme.write_text("\n".join(merged) + "\n", encoding="utf-8")
