"""SHA-256 on the event loop's thread without handing the interpreter lock away.

hashlib lets other threads run while it hashes 2048 bytes or more in one call (and, in CPython 3.11, on
every later call on a hash object that once did). On the event loop's thread that is a loss: the hashing
takes microseconds, but the thread must then win the lock back from a busy critic or writer thread, which
keeps it up to the interpreter's switch interval (5 ms). Fed in shorter slices, hashlib keeps the lock;
the digest is the same.
"""

from __future__ import annotations

import hashlib
from typing import Any

#: hashlib releases the interpreter lock for a buffer this long or longer
_UNLOCKED_BYTES = 2048
_SLICE = _UNLOCKED_BYTES - 1


def feed(h: Any, data: bytes) -> None:
    """``h.update(data)``, in slices short enough that hashlib keeps the interpreter lock."""
    if len(data) < _UNLOCKED_BYTES:
        h.update(data)
        return
    view = memoryview(data)
    for at in range(0, len(data), _SLICE):
        h.update(view[at : at + _SLICE])


def sha256_hex(data: bytes) -> str:
    """``hashlib.sha256(data).hexdigest()``, hashed in slices (see :func:`feed`)."""
    h = hashlib.sha256()
    feed(h, data)
    return h.hexdigest()
