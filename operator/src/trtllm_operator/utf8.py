"""Where a file stops being UTF-8 text: the one home of the position that the manifest reader
(commands/_manifests.py) and the trace readers (simulate/traces.py) name in their "not UTF-8 text"
errors (fresh-user trial 45 A17: both read files a user gives, and a Latin-1 byte, a UTF-16 file or a
binary file ended in a ``UnicodeDecodeError`` traceback)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class NotUtf8:
    """The first byte of a file that is not UTF-8: its 1-based ``line``, its ``offset`` in the file
    (bytes) and its value ``byte``."""

    line: int
    offset: int
    byte: int

    def __str__(self) -> str:
        return f"line {self.line}: not UTF-8 text (byte 0x{self.byte:02x} at offset {self.offset})"


def first_non_utf8(path: Path) -> NotUtf8 | None:
    """The first byte of the file at ``path`` that is not UTF-8, or None when the whole file decodes
    (read and decoded whole, so the offset is the file's, not a read chunk's)."""
    data = path.read_bytes()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return NotUtf8(data.count(b"\n", 0, exc.start) + 1, exc.start, data[exc.start])
    return None
