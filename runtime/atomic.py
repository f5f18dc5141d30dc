"""Saves that are all or nothing.

Every file is written under a temporary name in its own folder, flushed to
disk and renamed into place (a rename within a folder is atomic), so a reader
sees the old file or the new one, never a part. Files are created with the
permissions the user's umask gives, as ``open()`` would.

Two files that belong together -- a program and its parameters, a
checkpoint's parameters and its optimizer state -- are paired by a digest:
the *commit* file records the SHA-256 of the *data* file, and a save writes
them in this order:

1. the data file, in full, as ``.{name}.{digest[:16]}.pending``;
2. the commit file, renamed into place: from here on the new save is the
   current one;
3. the pending file, renamed to its real name; leftovers of earlier
   interrupted saves of these files are removed.

A process killed at any point leaves a consistent pair: before step 2 the
previous save is untouched; after it, a reader whose data file does not
match the recorded digest finds the pending file (``read_data``). Readers
never write: the next save of the same files cleans up. One save of a given
path at a time (two processes saving the same path at once may remove each
other's temporaries).
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets

__all__ = ["digest", "read_data", "remove_leftovers", "write", "write_pair"]


def digest(data) -> str:
    """The SHA-256 of ``data``, as 64 lowercase hex digits."""
    return hashlib.sha256(data).hexdigest()


def write(path, data) -> None:
    """Write ``data`` (bytes) to ``path`` atomically; remove leftovers of earlier
    interrupted writes of ``path``."""
    path = os.fspath(path)
    _write_renamed(path, data, _temporary(path))
    _sync_folder(path)
    remove_leftovers(path)


def write_pair(data_path, data, commit_path, commit_data) -> None:
    """Write two files as one save: ``commit_data`` records ``digest(data)``.

    See the module docstring for the order and what a reader finds when the
    process is killed midway."""
    data_path, commit_path = os.fspath(data_path), os.fspath(commit_path)
    pending = pending_path(data_path, digest(data))
    _write_renamed(pending, data, _temporary(data_path))
    _write_renamed(commit_path, commit_data, _temporary(commit_path))
    _sync_folder(commit_path)
    os.replace(pending, data_path)
    _sync_folder(data_path)
    remove_leftovers(commit_path)
    remove_leftovers(data_path)


def read_data(data_path, expected: str | None):
    """``(bytes, the path they came from, whether their digest is expected)``.

    The bytes are those of the pending file of a save interrupted after its
    commit when that file matches ``expected``, else those of ``data_path``
    (read as it is when ``expected`` is None: nothing recorded). A missing
    ``data_path`` without a matching pending file raises ``FileNotFoundError``.
    """
    data_path = os.fspath(data_path)
    if expected is not None:
        pending = pending_path(data_path, expected)
        if os.path.isfile(pending):
            data = _read(pending)
            if digest(data) == expected:
                return data, pending, True
    data = _read(data_path)
    return data, data_path, expected is None or digest(data) == expected


def pending_path(data_path: str, data_digest: str) -> str:
    folder, name = os.path.split(data_path)
    return os.path.join(folder, f".{name}.{data_digest[:16]}.pending")


def remove_leftovers(path) -> None:
    """Remove the temporary and pending files earlier interrupted saves of ``path`` left."""
    folder, name = os.path.split(os.path.abspath(os.fspath(path)))
    pattern = re.compile(rf"\.{re.escape(name)}\.[0-9a-f]+\.(tmp|pending)")
    try:
        entries = os.listdir(folder)
    except OSError:
        return
    for entry in entries:
        if pattern.fullmatch(entry):
            try:
                os.unlink(os.path.join(folder, entry))
            except OSError:
                pass


# ------------------------------------------------------------------ helpers


def _temporary(path: str) -> str:
    folder, name = os.path.split(path)
    return os.path.join(folder, f".{name}.{secrets.token_hex(6)}.tmp")


def _write_renamed(path: str, data, temporary: str) -> None:
    """Write ``temporary`` in full, flush it to disk and rename it to ``path``."""
    # O_EXCL with mode 0o666: a new file, with the permissions the umask gives
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0),
                 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


def _sync_folder(path: str) -> None:
    """Flush the folder entry of a rename to disk (where the platform allows it)."""
    try:
        fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _read(path: str) -> bytearray:
    """The file's bytes in one writable buffer of exactly its size."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        buffer = bytearray(size)
        view = memoryview(buffer)
        got = 0
        while got < size:
            n = f.readinto(view[got:])
            if not n:
                break
            got += n
        view.release()
    if got < size:  # the file shrank while being read
        del buffer[got:]
    return buffer
