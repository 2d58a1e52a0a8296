"""The controller's store connection, fail-safe: SQLite (one controller) or PostgreSQL (replicas, p4sec.ipsec.ha).

`FailSafe` wraps a connection that `open()` makes and gives the controller the interface it uses (`execute`,
`executescript`, `commit`, `rollback`, `close`). Any statement or commit that fails because of the store (a full
disk, a read-only store, a lost connection, the server gone) rolls the transaction back, drops the connection and
raises `StoreError`: nothing half-done stays, and the caller decides what to retry. The next use opens a new
connection, at most once per backoff delay (0.1 s, doubling up to 1 s while the store keeps failing; back to
0.1 s after a success), so an outage costs no busy loop and the first use after the store is back reconnects.
Errors that are the caller's (a constraint, a syntax error) roll back too and are raised unchanged.

`health()` says whether the store works (the last commit or connection attempt succeeded) and since when it has
been failing. `SCHEMA`: the controller's tables in SQLite."""
import sqlite3
import threading
import time

from p4sec.ipsec.ctlbase import ControllerError


class StoreError(ControllerError):
    """The store cannot be used right now (its transaction was rolled back)."""


BACKOFF_MIN, BACKOFF_MAX = 0.1, 1.0


class FailSafe:
    """A store connection that fails safe (see the module's description). `open()` returns a connection with
    execute/commit/rollback/close; `store_errors` are the exception types that mean the store failed (the
    connection is dropped); any other exception is rolled back and raised as is."""

    def __init__(self, open, store_errors, what, caller_errors=()):
        self._open, self._errors, self._caller, self.what = open, tuple(store_errors), tuple(caller_errors), what
        self.lock = threading.RLock()
        self.conn = None
        self.error, self.failing_since = None, None
        self.failures = 0
        self._delay, self._next = BACKOFF_MIN, 0.0
        self._connect(first=True)

    # ------------------------------------------------------------------ connection

    def _connect(self, first=False):
        if self.conn is not None:
            return self.conn
        now = time.monotonic()
        if not first and now < self._next:
            raise StoreError(f"{self.what} unavailable ({self.error}); next attempt in {self._next - now:.1f} s")
        try:
            self.conn = self._open()
        except self._errors as e:
            self._failed(e)
            raise StoreError(f"{self.what} unavailable: {_one_line(e)}") from None
        return self.conn

    def _failed(self, e):
        """The store failed: the transaction goes, so does the connection; the next attempt waits the backoff."""
        conn, self.conn = self.conn, None
        if conn is not None:
            for f in (conn.rollback, conn.close):
                try:
                    f()
                except Exception:
                    pass
        self.error = _one_line(e)
        self.failures += 1
        if self.failing_since is None:
            self.failing_since = time.time()
        self._next = time.monotonic() + self._delay
        self._delay = min(self._delay * 2, BACKOFF_MAX)

    def _ok(self):
        if self.failing_since is not None:
            self.failing_since, self.error, self.failures = None, None, 0
        self._delay = BACKOFF_MIN

    def _run(self, fn, *args, commits=False):
        with self.lock:
            conn = self._connect()
            try:
                out = fn(conn, *args)
            except BaseException as e:
                if isinstance(e, self._errors) and not isinstance(e, self._caller):
                    self._failed(e)
                    raise StoreError(f"{self.what} failed: {_one_line(e)}") from None
                try:
                    conn.rollback()
                except Exception:
                    pass
                raise
            if commits:
                self._ok()      # only a commit proves the store works again (a full disk still answers reads)
            return out

    # ------------------------------------------------------------------ the controller's interface

    def execute(self, sql, args=()):
        return self._run(lambda c: c.execute(sql, args))

    def executescript(self, script):
        return self._run(lambda c: c.executescript(script))

    def commit(self):
        return self._run(lambda c: c.commit(), commits=True)

    def rollback(self):
        with self.lock:
            if self.conn is not None:
                try:
                    self.conn.rollback()
                except self._errors as e:
                    self._failed(e)

    def close(self):
        with self.lock:
            if self.conn is not None:
                try:
                    self.conn.close()
                except Exception:
                    pass
                self.conn = None

    def health(self):
        """(ok, message): ok unless the last commit or connection attempt failed (the controller probes a failing
        store with a small commit until one lands); the message says what failed and since when."""
        with self.lock:
            if self.failing_since is None:
                return True, "ok"
            since = time.strftime("%H:%M:%S", time.localtime(self.failing_since))
            return False, f"failing since {since} ({self.failures} failures): {self.error}"


# the controller's tables in SQLite (p4sec.ipsec.ha.SCHEMA: the same in PostgreSQL, with its lease): tunnels, SAs
# (keys in `config`), the event log, key-value records (a tunnel's sites, encapsulation, a host's inner address ...)
# and the intent journal (p4sec.ipsec.recovery)
SCHEMA = (
    "create table if not exists tunnel (name text primary key, a text, b text, suite text, soft text, hard text,"
    " created real, state text);"
    "create table if not exists sa (spi integer primary key, tunnel text, src text, dst text, out_slot integer,"
    " in_slot integer, config text, created real, state text);"
    "create table if not exists event (t real, tunnel text, what text);"
    "create table if not exists kv (key text primary key, value text);"
    "create table if not exists intent (id integer primary key, op text, tunnel text, data text, t real);"
    "create index if not exists sa_tunnel on sa (tunnel);")


def _one_line(e):
    return " ".join(str(e).split()) or type(e).__name__


def sqlite(path):
    """The one controller's store: the SQLite file at `path` (WAL: a commit is an append, not a rewrite with two
    fsyncs; tunnel setup and renewal commit each time)."""
    def open_():
        conn = sqlite3.connect(path, check_same_thread=False)
        try:
            conn.execute("pragma journal_mode = wal")
            conn.execute("pragma synchronous = normal")
        except sqlite3.Error:
            conn.close()
            raise
        return conn
    # everything but the caller's own errors (a constraint, a misuse) is the store's: full, read-only, I/O, locked
    errors = (sqlite3.OperationalError, sqlite3.DatabaseError)
    return FailSafe(open_, errors, f"the store {path}",
                    (sqlite3.IntegrityError, sqlite3.ProgrammingError, sqlite3.DataError, sqlite3.NotSupportedError))
