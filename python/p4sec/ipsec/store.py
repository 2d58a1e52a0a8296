"""The controller's store connection, fail-safe: SQLite (one controller) or PostgreSQL (replicas, p4sec.ipsec.ha).

`FailSafe` wraps a connection that `open()` makes and gives the controller the interface it uses (`execute`,
`executescript`, `commit`, `rollback`, `close`). Any statement or commit that fails because of the store (a full
disk, a read-only store, a lost connection, the server gone) rolls the transaction back, drops the connection and
raises `StoreError`: nothing half-done stays, and the caller decides what to retry. The next use opens a new
connection, at most once per backoff delay (0.1 s, doubling up to 1 s while the store keeps failing; back to
0.1 s after a success), so an outage costs no busy loop and the first use after the store is back reconnects.
Errors that are the caller's (a constraint, a syntax error) roll back too and are raised unchanged.

`health()` says whether the store works (the last commit or connection attempt succeeded) and since when it has
been failing. `SCHEMA`: the controller's tables in SQLite.

`Records` is the one way the controller and its parts read and write the store: named methods per kind of record
(tunnels, SAs, a tunnel's sites and encapsulation, host tunnels, IKEv2 records, events, the intent journal) over
any connection with this interface (FailSafe, p4sec.ipsec.ha.PgDb, a read-only connection). No other module
writes SQL or builds the keys of the key-value table; the schema and the keys are those of earlier stores, which
load unchanged."""
import json
import sqlite3
import threading
import time
from collections import namedtuple

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


def sqlite_reader(path):
    """A read-only connection of its own to the SQLite store at `path` (the status page's: p4sec.ipsec.status_reads)."""
    conn = sqlite3.connect(path, check_same_thread=False)
    conn.execute("pragma query_only = 1")
    return conn


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


# ---------------------------------------------------------------------------------------------- the records

Tunnel = namedtuple("Tunnel", "name a b suite soft hard created state")     # soft, hard: JSON text
SA = namedtuple("SA", "spi tunnel src dst out_slot in_slot config created state")  # config: JSON text (keys in it)

_TUNNEL = "select name, a, b, suite, soft, hard, created, state from tunnel"
_SA = "select spi, tunnel, src, dst, out_slot, in_slot, config, created, state from sa"
LIVE = ("inbound", "active", "retiring")        # the states of an SA that a gateway holds (or is about to)


def pair_key(sites):
    """The key of the pair of prefixes a site-to-site tunnel protects ({gateway: prefix}), whichever its
    direction: at most one tunnel protects a pair."""
    return "pair:" + "|".join(f"{g}={p}" for g, p in sorted(sites.items()))


def _in(column, values):
    return f"{column} in ({', '.join('?' * len(values))})", tuple(values)


def _where(conds):
    """conds: [(sql, args)] -> (" where a and b", args)."""
    conds = [c for c in conds if c]
    if not conds:
        return "", ()
    return " where " + " and ".join(c for c, _ in conds), tuple(a for _, args in conds for a in args)


class Records:
    """The controller's records in the store (see the module's description), on `db` (execute, commit, health).
    `event_id`: the column that orders the event log ("rowid" in SQLite, "id" in PostgreSQL read directly)."""

    def __init__(self, db, event_id="rowid"):
        self.db, self._id = db, event_id

    def _one(self, sql, args=()):
        return self.db.execute(sql, args).fetchone()

    def _all(self, sql, args=()):
        return self.db.execute(sql, args).fetchall()

    def create_tables(self):
        """Create the tables an empty store lacks (SCHEMA; PostgreSQL's connection has its own, p4sec.ipsec.ha)."""
        self.db.executescript(SCHEMA)

    def commit(self):
        """Commit the transaction the writes since the last commit opened."""
        return self.db.commit()

    def health(self):
        """(ok, message) of the store (FailSafe.health)."""
        return self.db.health()

    def probe(self):
        """A small write (committed by the caller) that proves the store takes writes again."""
        self.db.execute("insert or replace into kv values (?, ?)", ("store-probe", repr(time.time())))

    # ------------------------------------------------------------------ tunnels

    def tunnel(self, name, states=None):
        """Tunnel `name` (in one of `states`, if given), or None."""
        conds = [("name = ?", (name,))] + ([_in("state", states)] if states else [])
        w, args = _where(conds)
        r = self._one(_TUNNEL + w, args)
        return Tunnel(*r) if r else None

    def tunnels(self, states=None, gateway=None, between=None):
        """[Tunnel] by creation: those in `states`, of `gateway` (a or b), `between` two gateways (either way)."""
        conds = [_in("state", states) if states else None,
                 ("(a = ? or b = ?)", (gateway, gateway)) if gateway else None,
                 ("((a = ? and b = ?) or (a = ? and b = ?))", between + between[::-1]) if between else None]
        w, args = _where(conds)
        return [Tunnel(*r) for r in self._all(_TUNNEL + w + " order by created", args)]

    def put_tunnel(self, name, a, b, suite, soft, hard, state):
        """Record tunnel `name` (replacing an earlier record), created now; soft and hard limits as JSON."""
        self.db.execute("insert or replace into tunnel values (?, ?, ?, ?, ?, ?, ?, ?)",
                        (name, a, b, suite, json.dumps(soft), json.dumps(hard), time.time(), state))

    def restore_tunnel(self, row):
        """Put back a Tunnel as it was read."""
        self.db.execute("insert into tunnel values (?, ?, ?, ?, ?, ?, ?, ?)", tuple(row))

    def set_tunnel_state(self, name, state, only_from=None):
        """Tunnel `name` is now in `state` (only if it is in `only_from`, if given)."""
        extra, args = ("", ()) if only_from is None else (" and state = ?", (only_from,))
        self.db.execute("update tunnel set state = ? where name = ?" + extra, (state, name) + args)

    def delete_tunnel(self, name):
        self.db.execute("delete from tunnel where name = ?", (name,))

    # ------------------------------------------------------------------ SAs

    def sa(self, spi):
        """SA `spi` (whatever its state), or None."""
        r = self._one(_SA + " where spi = ?", (spi,))
        return SA(*r) if r else None

    def sas(self, tunnel=None, src=None, dst=None, states=None, live=False, by_creation=False):
        """[SA] of `tunnel`, from `src`, to `dst`, in one of `states`, or not deleted (`live`); by creation if
        asked (otherwise in the store's order)."""
        conds = [("tunnel = ?", (tunnel,)) if tunnel is not None else None, ("src = ?", (src,)) if src is not None else None,
                 ("dst = ?", (dst,)) if dst is not None else None, _in("state", states) if states else None,
                 ("state != 'deleted'", ()) if live else None]
        w, args = _where(conds)
        return [SA(*r) for r in self._all(_SA + w + (" order by created" if by_creation else ""), args)]

    def active_spis(self, tunnel):
        """[spi] of the tunnel's active SAs."""
        return [r[0] for r in self._all("select spi from sa where tunnel = ? and state = 'active'", (tunnel,))]

    def live_sa_states(self):
        """[(spi, tunnel, src, dst, out_slot, in_slot, state, created)] of the SAs not deleted, by creation (no keys)."""
        return self._all("select spi, tunnel, src, dst, out_slot, in_slot, state, created from sa where state != 'deleted' "
                         "order by created")

    def spi_taken(self, spi, live=False):
        """Whether an SA (a live one, if `live`) has this SPI."""
        return self._one("select 1 from sa where spi = ?" + (" and state != 'deleted'" if live else ""), (spi,)) is not None

    def tunnel_has_live_sas(self, tunnel):
        return self._one("select 1 from sa where tunnel = ? and state != 'deleted'", (tunnel,)) is not None

    def active_spi(self, spi=None, gateway=None, slot=None):
        """The SPI of the active SA `spi`, or of the one in `gateway`'s `slot` (sending or receiving), or None."""
        if spi is not None:
            r = self._one("select spi from sa where state = 'active' and spi = ?", (spi,))
        else:
            r = self._one("select spi from sa where state = 'active' and ((src = ? and out_slot = ?) or (dst = ? and in_slot = ?))",
                          (gateway, slot, gateway, slot))
        return r[0] if r else None

    def slots_in_use(self, gateway):
        """{slot} of gateway's SA slots its recorded live SAs use (outbound as the sender, inbound as the receiver)."""
        return {r[0] for r in self._all(
            "select out_slot from sa where src = ? and state in ('inbound', 'active', 'retiring') and out_slot >= 0 union "
            "select in_slot from sa where dst = ? and state in ('inbound', 'active', 'retiring') and in_slot >= 0",
            (gateway, gateway))}

    def sas_with_peers(self, gateway, peer_prefix):
        """[spi] of the live SAs between `gateway` and a peer whose name starts with `peer_prefix`."""
        return [r[0] for r in self._all("select spi from sa where state != 'deleted' and ((src = ? and dst like ?) or "
                                        "(dst = ? and src like ?))", (gateway, peer_prefix + "%", gateway, peer_prefix + "%"))]

    def add_sa(self, spi, tunnel, src, dst, out_slot, in_slot, config, state):
        """Record a new SA created now (`config`: its esp_sad configuration, keys included)."""
        self.db.execute("insert into sa values (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (spi, tunnel, src, dst, out_slot, in_slot, json.dumps(config), time.time(), state))

    def set_sa_state(self, spis, state, only_from=None):
        """SA(s) `spis` (one SPI or several) are now in `state` (only those in `only_from`, if given)."""
        spis = (spis,) if isinstance(spis, int) else tuple(spis)
        cond, args = _in("spi", spis)
        extra, more = ("", ()) if only_from is None else (" and state = ?", (only_from,))
        self.db.execute(f"update sa set state = ? where {cond}" + extra, (state,) + args + more)

    def set_tunnel_sas_state(self, tunnel, state, live_only=False):
        """Every SA of `tunnel` (every one not deleted, if `live_only`) is now in `state`."""
        self.db.execute("update sa set state = ? where tunnel = ?" + (" and state != 'deleted'" if live_only else ""), (state, tunnel))

    def delete_sa(self, spi):
        self.db.execute("delete from sa where spi = ?", (spi,))

    # ------------------------------------------------------------------ a tunnel's sites, encapsulation, pair of prefixes

    def _get(self, key):
        r = self._one("select value from kv where key = ?", (key,))
        return r[0] if r else None

    def _put(self, key, value):
        self.db.execute("insert or replace into kv values (?, ?)", (key, value))

    def _delete(self, key):
        self.db.execute("delete from kv where key = ?", (key,))

    def _prefixed(self, prefix):
        """{key without prefix: value} of the keys starting with `prefix`."""
        return {k[len(prefix):]: v for k, v in self._all("select key, value from kv where key like ?", (prefix + "%",))}

    def sites(self, tunnel):
        """{gateway: prefix} a tunnel protects, as recorded (None if not recorded)."""
        v = self._get(f"sites:{tunnel}")
        return json.loads(v) if v is not None else None

    def all_sites(self):
        """{tunnel: {gateway: prefix}} of every tunnel with recorded sites."""
        return {k: json.loads(v) for k, v in self._prefixed("sites:").items()}

    def encap(self, tunnel):
        """The tunnel's recorded encapsulation ("esp", "udp"; None if not recorded)."""
        return self._get(f"encap:{tunnel}")

    def all_encaps(self):
        """{tunnel: encapsulation} of every tunnel with one recorded."""
        return self._prefixed("encap:")

    def put_sites(self, tunnel, sites):
        self._put(f"sites:{tunnel}", json.dumps(sites))

    def put_encap(self, tunnel, encap):
        self._put(f"encap:{tunnel}", encap)

    def forget_sites_and_encap(self, tunnel):
        self.db.execute("delete from kv where key in (?, ?)", (f"sites:{tunnel}", f"encap:{tunnel}"))

    def restore_sites_and_encap(self, tunnel, sites, encap):
        """Put back a tunnel's sites and encapsulation as they were read (raw: `sites_raw`; None: none)."""
        if sites is not None:
            self.db.execute("insert into kv values (?, ?)", (f"sites:{tunnel}", sites))
        if encap is not None:
            self.db.execute("insert into kv values (?, ?)", (f"encap:{tunnel}", encap))

    def sites_raw(self, tunnel):
        """The tunnel's sites as stored (JSON text, or None): to put back with restore_sites_and_encap."""
        return self._get(f"sites:{tunnel}")

    def pair_owner(self, sites):
        """The tunnel that protects this pair of prefixes ({gateway: prefix}), or None."""
        return self._get(pair_key(sites))

    def claim_pair(self, sites, tunnel):
        self._put(pair_key(sites), tunnel)

    def release_pair(self, sites, tunnel):
        """The pair is no longer `tunnel`'s (if it was)."""
        self.db.execute("delete from kv where key = ? and value = ?", (pair_key(sites), tunnel))

    # ------------------------------------------------------------------ host-to-site tunnels

    def inner(self, tunnel):
        """The inner address (a prefix) of a host tunnel's host, or None."""
        return self._get(f"inner:{tunnel}")

    def all_inner(self):
        """{tunnel: inner prefix} of every host tunnel."""
        return self._prefixed("inner:")

    def put_inner(self, tunnel, prefix):
        self._put(f"inner:{tunnel}", prefix)

    def host_info(self, tunnel):
        """{address, mac} of a host tunnel's host as announced, or None."""
        v = self._get(f"hostinfo:{tunnel}")
        return json.loads(v) if v is not None else None

    def put_host_info(self, tunnel, info):
        self._put(f"hostinfo:{tunnel}", json.dumps(info))

    def host_address(self, profile, client):
        """The inner address given to `client` in `profile`'s pool, or None."""
        return self._get(f"addr:{profile}:{client}")

    def host_addresses(self, profile):
        """{address} given out of `profile`'s pool."""
        return set(self._prefixed(f"addr:{profile}:").values())

    def add_host_address(self, profile, client, address):
        """Give `address` to `client` (refused by the store if the client has one)."""
        self.db.execute("insert into kv values (?, ?)", (f"addr:{profile}:{client}", address))

    # ------------------------------------------------------------------ IKEv2 (p4sec.ipsec.ike, p4sec.ipsec.ike_endpoint)

    def put_ike_port(self, gateway, port, mac):
        """Gateway's charon: IKE punted out of `port` to `mac`."""
        self._put(f"ikeport:{gateway}", json.dumps([int(port), mac]))

    def ike_ports(self):
        """{gateway: (port, mac)} of the gateways whose charon IKE is punted to."""
        return {g: tuple(json.loads(v)) for g, v in self._prefixed("ikeport:").items()}

    def ike_policies(self, gateway=None):
        """[policy dict] of the recorded outbound IKE policies (of one gateway)."""
        out = [json.loads(v) for v in self._prefixed("ikepol:").values()]
        return [p for p in out if gateway is None or p["gw"] == gateway]

    @staticmethod
    def _ike_policy_key(gateway, src, dst):
        return f"ikepol:{gateway}|{src}|{dst}"

    def ike_policy(self, gateway, src, dst):
        """The outbound IKE policy of `gateway` from `src` to `dst` (prefixes), or None."""
        v = self._get(self._ike_policy_key(gateway, src, dst))
        return json.loads(v) if v is not None else None

    def put_ike_policy(self, pol):
        """Record (or update) an outbound IKE policy ({gw, src, dst, ...})."""
        self._put(self._ike_policy_key(pol["gw"], pol["src"], pol["dst"]), json.dumps(pol))

    def delete_ike_policy(self, pol):
        self._delete(self._ike_policy_key(pol["gw"], pol["src"], pol["dst"]))

    def ike_selectors(self, spi=None):
        """The extra selector pairs of IKE SA `spi` ([[remote, local]], None if none); without spi, {spi: pairs}."""
        if spi is None:
            return {int(k): json.loads(v) for k, v in self._prefixed("ikesel:").items()}
        v = self._get(f"ikesel:{spi}")
        return json.loads(v) if v is not None else None

    def put_ike_selectors(self, spi, pairs):
        self._put(f"ikesel:{spi}", json.dumps(pairs))

    def delete_ike_selectors(self, spi):
        self._delete(f"ikesel:{spi}")

    # ------------------------------------------------------------------ events

    def add_event(self, tunnel, what):
        """Record an event of a tunnel or gateway (committed with the caller's transaction)."""
        self.db.execute("insert into event values (?, ?, ?)", (time.time(), tunnel, what))

    def events(self, tunnel=None):
        """[(time, tunnel or gateway, what)] oldest first (of one tunnel or gateway)."""
        q = "select t, tunnel, what from event" + (" where tunnel = ?" if tunnel else "") + " order by rowid"
        return self._all(q, (tunnel,) if tunnel else ())

    def last_events(self, tunnel, n):
        """The last n events of a tunnel or gateway, newest first: [(t, what)]."""
        return self._all(f"select t, what from event where tunnel = ? order by {self._id} desc limit ?", (tunnel, n))

    def events_since(self, after, starting):
        """[(id, tunnel, what)] of the events after id `after` whose text starts with `starting`, in order."""
        i = self._id
        return self._all(f"select {i}, tunnel, what from event where {i} > ? and what like ? order by {i}", (after, starting + "%"))

    # ------------------------------------------------------------------ the intent journal (p4sec.ipsec.recovery)

    def add_intent(self, op, tunnel, data):
        """Record an operation in flight; its id."""
        return self.db.execute("insert into intent (op, tunnel, data, t) values (?, ?, ?, ?)",
                               (op, tunnel, json.dumps(data), time.time())).lastrowid

    def delete_intent(self, iid):
        self.db.execute("delete from intent where id = ?", (iid,))

    def intents(self):
        """[(id, op, tunnel, data)] in the order they were recorded (data decoded)."""
        return [(i, op, t, json.loads(d)) for i, op, t, d in self._all("select id, op, tunnel, data from intent order by id")]

    def clear_intents(self):
        self.db.execute("delete from intent")
