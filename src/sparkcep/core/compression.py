"""Compressed input files: which codec a file name says, and its decompressed bytes (pure: no Spark).

Spark's text source decompresses a file by the suffix of its name (Hadoop's codecs); sparkcep's readers do the
same for the codecs Python reads exactly:

- ``.gz`` gzip (concatenated members too, as ``cat a.gz b.gz`` makes), ``.bz2`` bzip2 (concatenated streams
  too), ``.zst`` zstd (concatenated frames too), ``.deflate`` a zlib stream (what Hadoop's DefaultCodec
  writes). Suffixes are matched whatever their case.
- ``.lz4`` and ``.snappy`` are refused: Hadoop writes them in a block format of its own, and the ``lz4`` and
  ``snappy`` tools in another (frames), so neither reading would be right for every such file. Such a file is
  one dead letter that says so (see :func:`unreadable_reason`), never lines of compressed bytes read as text.

:func:`decompressed` hands out every byte that decompresses, then raises :class:`DecompressionError` where the
data is damaged or ends early (a truncated file, or one still being written): callers keep the whole lines before
it and make the rest one dead letter. The engine's reader (:mod:`sparkcep.io.compressed`) and the oracle's
(:mod:`sparkcep.core.lines`) both decompress here, so they see the same bytes and give the same dead letter.
"""

from __future__ import annotations

import bz2
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from sparkcep.errors import SparkcepError

_INPUT = 64 << 10  # compressed bytes fed at a time (zstd: a quarter, see _Zstd)
_OUTPUT = 1 << 20  # most decompressed bytes one step hands out (gzip, deflate, bzip2)
_HEAD = 24  # bytes of a file shown when it is not the codec's data at all


@dataclass(frozen=True)
class Codec:
    name: str  # as users know it: "gzip"
    suffix: str  # the name's ending that selects it: ".gz"
    readable: bool = True  # False: refused (see the module's description)


GZIP = Codec("gzip", ".gz")
BZIP2 = Codec("bzip2", ".bz2")
ZSTD = Codec("zstd", ".zst")
DEFLATE = Codec("deflate", ".deflate")
LZ4 = Codec("lz4", ".lz4", readable=False)
SNAPPY = Codec("snappy", ".snappy", readable=False)
CODECS = (GZIP, BZIP2, ZSTD, DEFLATE, LZ4, SNAPPY)
_BY_SUFFIX = {codec.suffix: codec for codec in CODECS}
READABLE_SUFFIXES = ", ".join(codec.suffix for codec in CODECS if codec.readable)


def codec_of(name: str) -> Codec | None:
    """The codec a file name selects by its suffix; None for a plain file (read as it is)."""
    dot = name.rfind(".")
    return None if dot < 0 else _BY_SUFFIX.get(name[dot:].lower())


class DecompressionError(SparkcepError):
    """A file's compressed data cannot be decompressed from some point on; ``detail`` says why, in words."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class _Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


class _Decoder(Protocol):
    """One stream of a codec (a gzip member, a zstd frame): ``step`` takes compressed bytes and returns the
    decompressed bytes, what to feed next (None: more input; ``b""``: call again, output is pending) and
    whether the stream ended (what follows it, if anything, starts the next one)."""

    def step(self, data: bytes) -> tuple[bytes, bytes | None, bool]: ...

    def finish(self) -> tuple[bytes, bool]: ...


class _Zlib:
    def __init__(self, wbits: int) -> None:
        self._d = zlib.decompressobj(wbits)

    def step(self, data: bytes) -> tuple[bytes, bytes | None, bool]:
        out = self._d.decompress(data, _OUTPUT)
        if self._d.eof:
            return out, self._d.unused_data, True
        return out, self._d.unconsumed_tail or None, False

    def finish(self) -> tuple[bytes, bool]:
        out = self._d.flush()  # what a step held back at its output bound when the input ran out
        return out, self._d.eof


class _Bz2:
    def __init__(self) -> None:
        self._d = bz2.BZ2Decompressor()

    def step(self, data: bytes) -> tuple[bytes, bytes | None, bool]:
        out = self._d.decompress(data, _OUTPUT)
        if self._d.eof:
            return out, self._d.unused_data, True
        return out, (None if self._d.needs_input else b""), False

    def finish(self) -> tuple[bytes, bool]:
        return b"", self._d.eof


class _Zstd:
    # zstandard's reader ends quietly at a truncated frame, so frames are decoded one step at a time here, where
    # the end of a frame shows (``eof``). Its steps are not bounded in output: the input comes in smaller pieces.
    def __init__(self) -> None:
        import zstandard

        self._d = zstandard.ZstdDecompressor().decompressobj()

    def step(self, data: bytes) -> tuple[bytes, bytes | None, bool]:
        out: bytes = self._d.decompress(data)
        if self._d.eof:
            return out, self._d.unused_data, True
        return out, None, False

    def finish(self) -> tuple[bytes, bool]:
        return b"", bool(self._d.eof)


def _decoders(codec: Codec) -> tuple[Callable[[], _Decoder], tuple[type[BaseException], ...], int]:
    """How to start one stream of ``codec``, the exceptions its damaged data raises, and the input per step."""
    errors: tuple[type[BaseException], ...] = (zlib.error, OSError, EOFError, ValueError)
    if codec == GZIP:
        return (lambda: _Zlib(zlib.MAX_WBITS | 16)), errors, _INPUT
    if codec == DEFLATE:
        return (lambda: _Zlib(zlib.MAX_WBITS)), errors, _INPUT
    if codec == BZIP2:
        return _Bz2, errors, _INPUT
    import zstandard

    zstd_error: Any = zstandard.ZstdError
    return _Zstd, (*errors, zstd_error), _INPUT // 4


def decompressed(handle: _Readable, codec: Codec) -> Iterator[bytes]:
    """The decompressed bytes of the compressed data ``handle`` reads, in chunks of at most a few MB.

    Raises :class:`DecompressionError` where the data is damaged, after every byte before it: a codec refused
    (``.lz4``, ``.snappy``), data that is not the codec's, a bad checksum, a stream that ends before its end
    marker. An empty file is empty content, not an error.
    """
    if not codec.readable:
        raise DecompressionError(
            f"expected a compression sparkcep reads ({READABLE_SUFFIXES}), got {codec.name} ({codec.suffix}), "
            "which Hadoop writes in a block format of its own and the lz4 and snappy tools in another, so sparkcep "
            f"reads neither: decompress the file, or compress it as .gz or .zst"
        )
    start, errors, piece = _decoders(codec)
    decoder = start()
    begun = False  # the current stream (member, frame) has taken input: it must reach its end marker
    produced = False  # anything decompressed yet: the error then says "damaged", not "not this codec's data"
    head = b""
    while chunk := handle.read(piece):
        head = head or chunk[:_HEAD]
        data: bytes | None = chunk
        while data is not None:
            begun = begun or bool(data)
            try:
                out, data, ended = decoder.step(data)
            except errors as exc:
                raise DecompressionError(_damaged(codec, exc, produced, head)) from None
            if out:
                produced = True
                yield out
            if ended:  # the stream is whole: what follows it (if anything) is the next one
                decoder = start()
                begun = False
                data = data or None
    out, ended = decoder.finish()
    if out:
        yield out
    if begun and not ended:
        raise DecompressionError(
            f"{codec.name} data ends before its end-of-stream marker (the file was cut short, or was still being "
            "written when it was read: write compressed files under a '.' name and rename them when complete)"
        )


def _damaged(codec: Codec, error: BaseException, produced: bool, head: bytes) -> str:
    said = " ".join(str(error).split()) or type(error).__name__  # one line: the text becomes a record's reason
    if not produced:  # not this codec's data at all (a plain file so named), or damaged right at its start
        return f"expected {codec.name} data, got bytes it cannot read from the start ({said}; the file starts {head!r})"
    return f"{codec.name} data damaged ({said})"


def unreadable_reason(name: str, detail: str, kept: int) -> str:
    """The dead letter of an input file whose rest cannot be read: names the file and what was wrong, and how much
    of it was read (``kept``: decompressed bytes of the whole lines before the damage)."""
    read = (
        f"its first {kept} decompressed bytes (whole lines) were read, the rest of it is left out"
        if kept
        else "nothing of it was read"
    )
    return f"input file {name!r}: {detail}; {read}"
