"""User-facing errors.

Every problem caused by the user's input (a missing file, a bad config value, an unreadable line) is raised
as :class:`KplmError` with a one-line message naming the file, line or field. The CLI prints it as
``kplm: error: <message>`` and exits with status 2, never with a traceback.
"""

from __future__ import annotations


class KplmError(Exception):
    """An error in the user's input or environment, reported as one clear line."""

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))


def require_file(path: str, what: str = "input file") -> None:
    """Raise a :class:`KplmError` naming ``path`` unless it is an existing local file or a URL."""
    import os

    if "://" in str(path):
        return
    if not os.path.exists(path):
        raise KplmError(f"{what} not found: {path}")
