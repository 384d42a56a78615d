"""Where a bucket's pages of state live (sparkcep.core.pages): Spark's state store in a job
(sparkcep.spark.processor), a dict in the local runner and the tests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class PageStore(Protocol):
    """Where pages live: one value per page id."""

    def read(self, pages: Sequence[int], total: int) -> dict[int, bytes]:
        """The values of ``pages`` that exist. ``total`` is how many pages the bucket has, so a store that can
        read all of them more cheaply than one by one may do so (and return the ones asked for)."""
        ...

    def write(self, page: int, value: bytes) -> None: ...

    def remove(self, page: int) -> None: ...


class DictPageStore:
    """Pages in a dict, counting reads and writes: the local runner's store and the tests'."""

    def __init__(self) -> None:
        self.values: dict[int, bytes] = {}
        self.reads = 0
        self.writes = 0

    def read(self, pages: Sequence[int], total: int) -> dict[int, bytes]:
        self.reads += len(pages)
        return {page: self.values[page] for page in pages if page in self.values}

    def write(self, page: int, value: bytes) -> None:
        self.writes += 1
        self.values[page] = value

    def remove(self, page: int) -> None:
        self.writes += 1
        self.values.pop(page, None)
