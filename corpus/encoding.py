"""Detect legacy Korean encodings (CP949, of which EUC-KR is a subset) in line-based source files.

A file is read as CP949 only when most non-ASCII lines of its first 64 KiB are *not* valid UTF-8 but decode
cleanly as CP949 into text whose non-ASCII characters are mostly Hangul syllables of the KS X 1001 set (the 2,350 syllables EUC-KR
can encode, which real Korean text almost exclusively uses). That last check is what keeps mojibake out:
Latin-1 or random bytes read as CP949 land in the extended (UHC) syllables and Hanja, not in KS X 1001
Hangul. Any other file is read as UTF-8, and each line that is not valid UTF-8 is quarantined with its file
and line number, never guessed at.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import IO

SNIFF_BYTES = 1 << 16
MIN_KS_HANGUL_SHARE = 0.5


def _ks_x_1001_hangul(ch: str) -> bool:
    if not 0xAC00 <= ord(ch) <= 0xD7A3:
        return False
    try:
        ch.encode("euc-kr")
    except UnicodeEncodeError:
        return False
    return True


def looks_like_cp949(data: bytes) -> bool:
    """True when the lines of ``data`` (the start of a file) that are not plain ASCII are mostly not UTF-8
    but clean CP949, and that CP949 text is Hangul-rich. Lines that decode as neither are ignored here (they
    are quarantined when read), so one broken line does not decide a file's encoding."""
    utf8 = 0
    decoded: list[str] = []
    for line in data.split(b"\n")[:-1] if b"\n" in data else [data]:
        if line.isascii():
            continue
        try:
            line.decode("utf-8")
            utf8 += 1
            continue
        except UnicodeDecodeError:
            pass
        try:
            decoded.append(line.decode("cp949"))
        except UnicodeDecodeError:
            continue
    if len(decoded) <= utf8:
        return False
    non_ascii = [ch for text in decoded for ch in text if ord(ch) > 0x7F]
    return sum(map(_ks_x_1001_hangul, non_ascii)) / len(non_ascii) >= MIN_KS_HANGUL_SHARE


def sniff_lines(stream: IO[bytes]) -> tuple[str, Iterator[bytes]]:
    """Read the start of a binary stream, guess its encoding (``"utf-8"`` or ``"cp949"``) and return it with
    an iterator over all the stream's lines (the sniffed bytes included)."""
    head = stream.read(SNIFF_BYTES)
    encoding = "cp949" if looks_like_cp949(head) else "utf-8"
    return encoding, _chain_lines(head, stream)


def _chain_lines(head: bytes, stream: IO[bytes]) -> Iterator[bytes]:
    tail = b""
    for line in io.BytesIO(head):
        if line.endswith(b"\n"):
            yield line
        else:
            tail = line
    rest = stream.readline()
    if tail or rest:
        yield tail + rest
    yield from stream
