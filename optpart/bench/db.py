"""The results database of a sweep: one SQLite file, one row per run.

SQLite is in the standard library, and with write-ahead logging (WAL) a reader (``optpart
report``, a notebook) can look at the file while a sweep writes to it; :func:`close` returns it
to a rollback journal when nothing else has it open. Each finished run is committed on its own
(atomically), so killing a sweep loses at most the runs in flight.

Only the processes that run sweeps write; their workers return plain dictionaries
and never touch the file. Several sweeps may share one file: each run is first
*claimed* in the ``claims`` table (one ``BEGIN IMMEDIATE`` transaction, so two
sweeps cannot claim one run), and the claim is dropped in the transaction that
writes the run's row. A sweep skips runs claimed by a live sweep and waits for
their rows; the claims of a sweep that died (its process is gone, same host) are
taken over. Claims from another host are respected until their sweep ends.

A run is identified by ``(problem_hash, solver, options)``: the SHA-256 of the
problem's optpart JSON (devices and memory limits included, so the device count
and memory scale are part of it), the solver name, and the solver options as
canonical JSON (sorted keys, e.g. ``{"seed": 0, "time_limit": 60.0}``). A
rerun of the same sweep skips every identity already in the file.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import socket
import sqlite3
import time
import uuid
from pathlib import Path
from typing import Any, Iterable, Mapping

from ..errors import OptpartError

__all__ = ["SCHEMA_VERSION", "COLUMNS", "connect", "close", "connect_readonly", "options_key", "done_keys", "insert_run",
           "load_runs", "claim", "release_claims", "owner_token"]

#: Bumped when the columns change meaning; a file with another version is refused.
SCHEMA_VERSION = 1

#: Columns of the ``runs`` table, in order, with their SQL types.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("problem_hash", "TEXT NOT NULL"),     # sha256 hex of the problem JSON bytes (devices applied)
    ("problem", "TEXT NOT NULL"),          # problem name
    ("source", "TEXT"),                    # file the problem came from, when any
    ("n_nodes", "INTEGER"),
    ("n_edges", "INTEGER"),
    ("solver", "TEXT NOT NULL"),
    ("options", "TEXT NOT NULL"),          # canonical JSON of the solver options
    ("devices", "INTEGER NOT NULL"),       # device count K
    ("memory_scale", "REAL NOT NULL"),
    ("capacity_bytes", "REAL"),            # smallest device capacity after scaling
    ("status", "TEXT NOT NULL"),           # optimal | feasible | infeasible | unknown | error
    ("makespan", "REAL"),                  # seconds; NULL without a placement
    ("lower_bound", "REAL"),               # seconds
    ("gap", "REAL"),                       # (makespan - lower_bound) / makespan; NULL without a placement
    ("memory", "TEXT"),                    # JSON {device id: {"static": bytes, "peak": bytes}}
    ("memory_model", "TEXT"),
    ("wall_seconds", "REAL"),
    ("message", "TEXT"),                   # the solver's message (e.g. why infeasible)
    ("version", "TEXT NOT NULL"),          # optpart version that produced the row
    ("timestamp", "TEXT NOT NULL"),        # ISO 8601, UTC, when the row was written
    ("error", "TEXT"),                     # exception text when status is 'error'
)

_NAMES = tuple(name for name, _ in COLUMNS)


def options_key(options: Mapping[str, Any]) -> str:
    """The canonical JSON of solver options: sorted keys, no spaces, None values dropped.

    Parameters
    ----------
    options : mapping of str to object
        Solver options of a run (JSON-serialisable values).

    Returns
    -------
    str
        The text stored in the ``options`` column: equal options, equal keys.
    """
    clean = {k: options[k] for k in sorted(options) if options[k] is not None}
    return json.dumps(clean, sort_keys=True, separators=(",", ":"))


_OPEN_TIMEOUT = 30.0  # seconds a sweep waits for another one holding the database


def _is_lock_error(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def _open_and_create(path: Path) -> tuple[sqlite3.Connection, str]:
    """One attempt to open ``path``, switch it to WAL and create the schema; returns the
    connection and the stored schema version. The connection is closed on failure."""
    con = sqlite3.connect(str(path), timeout=_OPEN_TIMEOUT)
    try:
        con.row_factory = sqlite3.Row
        con.execute("PRAGMA journal_mode=WAL")
        # NORMAL is safe against a killed process in WAL mode (only power loss may drop the last commits).
        con.execute("PRAGMA synchronous=NORMAL")
        cols = ",\n  ".join(f"{name} {kind}" for name, kind in COLUMNS)
        with con:
            con.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            con.execute(f"CREATE TABLE IF NOT EXISTS runs (\n  id INTEGER PRIMARY KEY,\n  {cols},\n"
                        "  UNIQUE (problem_hash, solver, options)\n)")
            con.execute("CREATE INDEX IF NOT EXISTS runs_setting ON runs (solver, devices, memory_scale)")
            con.execute("CREATE TABLE IF NOT EXISTS claims (problem_hash TEXT NOT NULL, solver TEXT NOT NULL, "
                        "options TEXT NOT NULL, owner TEXT NOT NULL, host TEXT NOT NULL, pid INTEGER NOT NULL, "
                        "claimed_at TEXT NOT NULL, PRIMARY KEY (problem_hash, solver, options))")
            con.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        found = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
    except BaseException:
        con.close()
        raise
    return con, found


def connect(path: str | Path) -> sqlite3.Connection:
    """Open (creating when needed) a results database in WAL mode and check its schema.

    Parameters
    ----------
    path : str or pathlib.Path
        The database file; its folder must exist.

    Returns
    -------
    sqlite3.Connection
        With rows as :class:`sqlite3.Row`; retries while another sweep holds the lock.

    Raises
    ------
    OptpartError
        When the file is not an SQLite database or holds another schema version.
    """
    path = Path(path)
    if path.is_dir():
        raise OptpartError(f"{path} is a directory, not a results database")
    if not path.parent.is_dir():
        raise OptpartError(f"cannot create the results database {path}: directory '{path.parent}' does not exist")
    deadline = time.monotonic() + _OPEN_TIMEOUT
    delay = 0.005
    while True:
        try:
            con, found = _open_and_create(path)
            break
        except sqlite3.OperationalError as exc:
            # Switching a fresh file to WAL takes an exclusive lock, and SQLite reports a
            # concurrent switch as "locked" at once, without its busy handler: two sweeps
            # starting together on a new database must wait for each other, not fail.
            if not _is_lock_error(exc) or time.monotonic() > deadline:
                raise OptpartError(f"{path}: cannot open the results database ({exc})") from None
            time.sleep(delay)
            delay = min(delay * 2, 0.25)
        except sqlite3.DatabaseError as exc:
            raise OptpartError(f"{path}: not an optpart results database ({exc})") from None
    if found != str(SCHEMA_VERSION):
        con.close()
        raise OptpartError(f"{path}: results schema version {found}, this optpart reads version {SCHEMA_VERSION}")
    return con


def close(con: sqlite3.Connection) -> None:
    """Close a sweep's connection, leaving one file behind: when no other connection has the
    database open, it is checkpointed and switched back from WAL to a rollback journal, so
    SQLite removes the ``-wal`` and ``-shm`` files (a sweep that starts later switches it to
    WAL again). While another sweep or a reader holds it, it stays in WAL mode.

    Parameters
    ----------
    con : sqlite3.Connection
        A connection from :func:`connect`.
    """
    try:
        con.execute("PRAGMA busy_timeout = 0")  # another connection: leave WAL on at once, never wait
        con.execute("PRAGMA journal_mode = DELETE")
    except sqlite3.OperationalError:  # busy: another sweep or a reader has it open
        pass
    finally:
        con.close()


def done_keys(con: sqlite3.Connection, *, include_errors: bool = True) -> set[tuple[str, str, str]]:
    """Identities ``(problem_hash, solver, options)`` already in the database.

    Parameters
    ----------
    con : sqlite3.Connection
        An open results database.
    include_errors : bool, optional
        False leaves out runs that ended in ``error`` (so ``--retry-errors`` runs them again).

    Returns
    -------
    set of tuple of str
    """
    sql = "SELECT problem_hash, solver, options FROM runs"
    if not include_errors:
        sql += " WHERE status != 'error'"
    return {(r[0], r[1], r[2]) for r in con.execute(sql)}


def owner_token() -> str:
    """An identity for this sweep's claims: host, process id and a random part.

    Returns
    -------
    str
        ``host:pid:random hex``, unique to this process and call.
    """
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


def _alive(host: str, pid: int) -> bool:
    """Whether a claim's sweep may still run: always True for another host (we cannot tell)."""
    if host != socket.gethostname():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by another user
        return True
    return True


def claim(con: sqlite3.Connection, key: tuple[str, str, str], owner: str, *,
          include_errors: bool = True) -> str:
    """Try to claim the run ``key`` for ``owner``.

    Returns ``"claimed"`` (run it), ``"done"`` (its row is there: skip it) or ``"busy"``
    (a live sweep holds it: wait for its row). One ``BEGIN IMMEDIATE`` transaction, so
    two sweeps never both get ``"claimed"``.

    Parameters
    ----------
    con : sqlite3.Connection
        An open results database.
    key : tuple of str
        The run's identity ``(problem_hash, solver, options)``.
    owner : str
        This sweep's token (:func:`owner_token`); a claim whose owner process is gone is taken over.
    include_errors : bool, optional
        False lets an ``error`` row be run again.

    Returns
    -------
    str
        ``"claimed"``, ``"done"`` or ``"busy"``.
    """
    host, pid = socket.gethostname(), os.getpid()
    con.execute("BEGIN IMMEDIATE")
    try:
        sql = "SELECT status FROM runs WHERE problem_hash = ? AND solver = ? AND options = ?"
        row = con.execute(sql, key).fetchone()
        if row is not None and (include_errors or row[0] != "error"):
            con.execute("COMMIT")
            return "done"
        held = con.execute("SELECT owner, host, pid FROM claims WHERE problem_hash = ? AND solver = ? "
                           "AND options = ?", key).fetchone()
        if held is not None and held[0] != owner and _alive(held[1], int(held[2])):
            con.execute("COMMIT")
            return "busy"
        stamp = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        con.execute("INSERT OR REPLACE INTO claims VALUES (?, ?, ?, ?, ?, ?, ?)", (*key, owner, host, pid, stamp))
        con.execute("COMMIT")
        return "claimed"
    except BaseException:
        con.execute("ROLLBACK")
        raise


def release_claims(con: sqlite3.Connection, owner: str) -> None:
    """Drop every claim of ``owner`` (a sweep ending, or interrupted).

    Parameters
    ----------
    con : sqlite3.Connection
        An open results database.
    owner : str
        The sweep's token.
    """
    with con:
        con.execute("DELETE FROM claims WHERE owner = ?", (owner,))


def insert_run(con: sqlite3.Connection, row: Mapping[str, Any], owner: str | None = None) -> None:
    """Write one run and commit at once; a row with the same identity is replaced. With
    ``owner``, the run's claim by that owner is dropped in the same transaction.

    Parameters
    ----------
    con : sqlite3.Connection
        An open results database.
    row : mapping of str to object
        Column values (:data:`COLUMNS`).
    owner : str, optional
        The sweep that claimed the run.

    Raises
    ------
    OptpartError
        When ``row`` lacks a required column or names an unknown one.
    """
    unknown = set(row) - set(_NAMES)
    if unknown:
        raise OptpartError(f"unknown result columns: {', '.join(sorted(unknown))}")
    for name, kind in COLUMNS:
        if "NOT NULL" in kind and row.get(name) is None:
            raise OptpartError(f"result row misses the required column '{name}'")
    values = [row.get(name) for name in _NAMES]
    with con:  # one transaction per run (row written, claim dropped): committed on exit
        con.execute(f"INSERT OR REPLACE INTO runs ({', '.join(_NAMES)}) VALUES ({', '.join('?' * len(_NAMES))})",
                    values)
        if owner is not None:
            con.execute("DELETE FROM claims WHERE problem_hash = ? AND solver = ? AND options = ? AND owner = ?",
                        (row["problem_hash"], row["solver"], row["options"], owner))


def connect_readonly(path: str | Path) -> sqlite3.Connection:
    """Open an existing results database for reading only: a missing, empty or foreign
    file is an error, and the file is never created, converted or written.

    Parameters
    ----------
    path : str or pathlib.Path
        An existing results database.

    Returns
    -------
    sqlite3.Connection
        Opened with ``mode=ro``.

    Raises
    ------
    OptpartError
        For a missing file, a directory, a file that is not SQLite, or another schema.
    """
    path = Path(path)
    if not path.exists():
        raise OptpartError(f"no such results database: {path}")
    if path.is_dir():
        raise OptpartError(f"{path} is a directory, not a results database")
    with open(path, "rb") as fh:
        head = fh.read(16)
    if head != b"SQLite format 3\x00":
        what = "an empty file" if not head else "not an SQLite file"
        raise OptpartError(f"{path}: not an optpart results database ({what})")
    try:
        con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30.0)
        con.row_factory = sqlite3.Row
        found = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        con.execute("SELECT 1 FROM runs LIMIT 1").fetchall()
    except sqlite3.DatabaseError as exc:
        raise OptpartError(f"{path}: not an optpart results database ({exc})") from None
    if found is None or found[0] != str(SCHEMA_VERSION):
        con.close()
        raise OptpartError(f"{path}: results schema version {found[0] if found else 'missing'}, "
                           f"this optpart reads version {SCHEMA_VERSION}")
    return con


def load_runs(path_or_con: str | Path | sqlite3.Connection,
              keys: Iterable[tuple[str, str, str]] | None = None) -> list[dict[str, Any]]:
    """Every run as a dictionary (ordered by id), optionally only those with the given identities.

    A path is opened read-only (:func:`connect_readonly`): reading never changes the file.

    Parameters
    ----------
    path_or_con : str, pathlib.Path or sqlite3.Connection
        The database, or an open connection (left open).
    keys : iterable of tuple of str, optional
        Identities ``(problem_hash, solver, options)`` to keep.

    Returns
    -------
    list of dict
        One dictionary of column values per run.
    """
    own = not isinstance(path_or_con, sqlite3.Connection)
    con = connect_readonly(path_or_con) if own else path_or_con
    try:
        rows = [dict(r) for r in con.execute("SELECT * FROM runs ORDER BY id")]
    finally:
        if own:
            con.close()
    if keys is not None:
        wanted = set(keys)
        rows = [r for r in rows if (r["problem_hash"], r["solver"], r["options"]) in wanted]
    return rows
