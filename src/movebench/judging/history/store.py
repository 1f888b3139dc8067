"""The history store: one DuckDB file of campaign runs, each with its launch-level estimates and fingerprint.

A user can open it with SQL (`duckdb history.duckdb "select * from runs"`). Writers take a lock file beside it
(POSIX record locks, which NFS and Lustre honour across hosts) before DuckDB opens it, and wait for it: two
campaigns ending at once both land, one after the other. A file that is not a movebench store, or one of another
schema version, is refused before anything opens it for writing, so it is left exactly as it was.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import os
import time
from pathlib import Path

import pandas as pd

from movebench.judging.history.run import Run

#: what a store's `movebench_store` table says it is
FORMAT = "movebench-history"
#: this movebench's store layout; a store of another version is migrated (MIGRATIONS) or refused
SCHEMA_VERSION = 1
#: version -> SQL that brings a store of that version to the next one. None yet: version 1 is the first layout.
MIGRATIONS: dict[int, list[str]] = {}
#: seconds a writer waits for another to finish before it gives up
LOCK_WAIT_S = 600.0
#: a DuckDB file's magic bytes, at offset 8
MAGIC = b"DUCK"

SCHEMA = [
    "CREATE TABLE movebench_store (key VARCHAR PRIMARY KEY, value VARCHAR)",
    """CREATE TABLE runs (
        run_id VARCHAR PRIMARY KEY, campaign VARCHAR NOT NULL, started TIMESTAMPTZ, ended TIMESTAMPTZ,
        wall_s DOUBLE, ok BOOLEAN, results VARCHAR, added TIMESTAMPTZ, fingerprint JSON)""",
    """CREATE TABLE estimates (
        run_id VARCHAR NOT NULL, family VARCHAR NOT NULL, point VARCHAR NOT NULL, measure VARCHAR NOT NULL,
        unit VARCHAR, better VARCHAR, estimate DOUBLE, ci_low DOUBLE, ci_high DOUBLE, ci_level VARCHAR,
        se_log DOUBLE, se DOUBLE, launches INTEGER, n INTEGER, between_share DOUBLE, sd_between_log DOUBLE,
        sd_within_log DOUBLE, rerun_low DOUBLE, rerun_high DOUBLE, fingerprint JSON,
        PRIMARY KEY (run_id, family, point, measure))""",
]
ESTIMATE_COLUMNS = ["run_id", "family", "point", "measure", "unit", "better", "estimate", "ci_low", "ci_high",
                    "ci_level", "se_log", "se", "launches", "n", "between_share", "sd_between_log", "sd_within_log",
                    "rerun_low", "rerun_high", "fingerprint"]


class StoreError(Exception):
    """A store that cannot be used as it is; the message says why and what to do."""


def config_problems(config: dict) -> list[tuple[str, object, str]]:
    """campaign.history, checked before any job: a file there must be a movebench store this version can add to."""
    path = config["campaign"].get("history")
    if not path:
        return []
    path = Path(path).expanduser()
    try:
        check_header(path)
        if path.exists():
            with locked(path, wait_s=60):
                check(path)
    except StoreError as exc:
        return [("campaign.history", config["campaign"]["history"], str(exc).split(": ", 1)[-1])]
    return []


def default_page(store) -> Path:
    """The history page written beside a store: history.duckdb -> history.html."""
    return Path(store).with_suffix(".html")


def check_header(path) -> None:
    """Refuse a file that is not a DuckDB database at all, from its first bytes (no lock needed, nothing opened)."""
    path = Path(path)
    if not path.exists():
        return
    if not path.is_file():
        raise StoreError(f"history store {path}: not a file")
    with open(path, "rb") as f:
        head = f.read(16)
    if len(head) < 12 or head[8:12] != MAGIC:
        raise StoreError(f"history store {path}: not a DuckDB database (a corrupt or foreign file); left as it is: "
                         "name another --store (or campaign.history)")


def check(path) -> None:
    """Refuse, before any write, a file that is not a movebench store of this schema version (it stays untouched).
    Opens it read-only: call it under the store's lock, where no writer has it open."""
    path = Path(path)
    check_header(path)
    if not path.exists():
        return
    import duckdb

    try:
        with contextlib.closing(duckdb.connect(str(path), read_only=True)) as con:
            tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
            if "movebench_store" not in tables:
                raise StoreError(f"history store {path}: a DuckDB database, but not a movebench history store (no "
                                 "movebench_store table); left as it is: name another --store")
            meta = dict(con.execute("SELECT key, value FROM movebench_store").fetchall())
    except duckdb.Error as exc:
        raise StoreError(f"history store {path}: DuckDB cannot open it ({str(exc).splitlines()[0]}); left as it is: "
                         "name another --store") from None
    if meta.get("format") != FORMAT:
        raise StoreError(f"history store {path}: its movebench_store table says format {meta.get('format')!r}, not "
                         f"{FORMAT!r}; left as it is")
    version = int(meta.get("schema_version", 0))
    if version > SCHEMA_VERSION:
        raise StoreError(f"history store {path}: schema version {version}, written by a newer movebench (this one "
                         f"reads {SCHEMA_VERSION}); left as it is: upgrade movebench to add to it")
    if version < SCHEMA_VERSION and any(v not in MIGRATIONS for v in range(version, SCHEMA_VERSION)):
        raise StoreError(f"history store {path}: schema version {version}, from an older movebench, which this one "
                         f"(schema {SCHEMA_VERSION}) cannot migrate; left as it is: add the runs' results folders to "
                         "a new store (python -m movebench history add RESULTS... --store NEW)")


@contextlib.contextmanager
def locked(path, wait_s: float = LOCK_WAIT_S):
    """The store's writer lock (`<store>.lock`), waited for up to `wait_s`."""
    lock_path = Path(str(path) + ".lock")
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o664)
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise StoreError(f"history store {path}: another process held {lock_path} for {wait_s:.0f} s; "
                                     "try again when it is done") from None
                time.sleep(0.1)
        yield
    finally:
        os.close(fd)  # closing releases the lock


@contextlib.contextmanager
def connect(path, write: bool):
    """A connection to a checked store, under its lock; a new store is created with this schema."""
    import duckdb

    path = Path(path)
    check_header(path)
    if not write and not path.exists():
        raise StoreError(f"history store {path}: no such file: add a run first (python -m movebench history add "
                         "RESULTS --store PATH)")
    if write:
        path.parent.mkdir(parents=True, exist_ok=True)
    with locked(path):
        check(path)
        fresh = not path.exists()
        con = duckdb.connect(str(path), read_only=not write)
        try:
            if fresh:
                con.execute("BEGIN")
                for statement in SCHEMA:
                    con.execute(statement)
                con.executemany("INSERT INTO movebench_store VALUES (?, ?)",
                                [("format", FORMAT), ("schema_version", str(SCHEMA_VERSION))])
                con.execute("COMMIT")
            elif write:
                _migrate(con)
            yield con
        finally:
            con.close()


def _migrate(con) -> None:
    version = int(dict(con.execute("SELECT key, value FROM movebench_store").fetchall())["schema_version"])
    if version == SCHEMA_VERSION:
        return
    con.execute("BEGIN")
    for v in range(version, SCHEMA_VERSION):
        for statement in MIGRATIONS[v]:
            con.execute(statement)
    con.execute("UPDATE movebench_store SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION)])
    con.execute("COMMIT")


def _ts(epoch: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(epoch, tz=dt.UTC)


def add(path, run: Run) -> bool:
    """Add a run; False when the store holds it already (the same campaign_run.json), which changes nothing."""
    with connect(path, write=True) as con:
        if con.execute("SELECT count(*) FROM runs WHERE run_id = ?", [run.run_id]).fetchone()[0]:
            return False
        con.execute("BEGIN")
        con.execute("INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [run.run_id, run.campaign, _ts(run.started), _ts(run.ended), run.wall_s, run.ok, run.results,
                     dt.datetime.now(dt.UTC), json.dumps(run.fingerprint, sort_keys=True)])
        if not run.estimates.empty:
            frame = run.estimates.assign(run_id=run.run_id)[ESTIMATE_COLUMNS]  # noqa: F841 - DuckDB reads it by name
            con.execute(f"INSERT INTO estimates SELECT {', '.join(ESTIMATE_COLUMNS)} FROM frame")
        con.execute("COMMIT")
        return True


def load(path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(runs ordered by start, every estimate joined to its run's campaign and start)."""
    with connect(path, write=False) as con:
        runs = con.sql("SELECT * FROM runs ORDER BY started, run_id").to_arrow_table().to_pandas()
        estimates = con.sql(
            "SELECT e.*, r.campaign, r.started FROM estimates e JOIN runs r USING (run_id) "
            "ORDER BY r.campaign, e.family, e.point, e.measure, r.started, e.run_id").to_arrow_table().to_pandas()
    return runs, estimates
