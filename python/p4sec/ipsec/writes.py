"""The IPsec controller's Writes to several gateways at once: one P4Runtime Write per gateway, all of them on the
wire together, then waited for; what each switch applied (a Write is not atomic), undoing what a failed
operation left, and removals whose failures are reported one by one rather than stopping the others.

Stateless: every function takes the gateways (p4sec.ipsec.ctlbase.Gateway) and their updates; used by
p4sec.ipsec.sites (site-to-site setup and teardown)."""
import logging

log = logging.getLogger("p4sec.controller")


def send(writes):
    """Send each gateway's Write ([(gw, updates)]) at once: [(gw, updates, pending)]. The last one is deferred:
    `wait` sends it and waits for it in the calling thread while the others are on the wire."""
    return [(gw, ups, gw.switch.write_async(ups, deferred=(i == len(writes) - 1))) for i, (gw, ups) in enumerate(writes)]


def answer_order(sent):
    """The indices of `sent` ([(gw, updates, pending)]) in the order to wait for them: a deferred Write first
    (it is sent then), the others after it."""
    return sorted(range(len(sent)), key=lambda i: not sent[i][2].deferred)


def wait(sent):
    """Wait for every Write in flight (a deferred one first: it is sent then); the first error (or None). Each
    entry's future is replaced by which of its updates the switch applied: all of them, those the switch
    reports (a Write is not atomic), or none if it said nothing (unreachable)."""
    err = None
    for i in answer_order(sent):
        gw, ups, fut = sent[i]
        try:
            fut.result()
            sent[i] = (gw, ups, [True] * len(ups))
        except Exception as e:
            applied = getattr(e, "applied", None)
            sent[i] = (gw, ups, applied if applied and len(applied) == len(ups) else [False] * len(ups))
            err = err or e
    return err


def undo(sent, updates_for):
    """Best effort: remove from each switch what the Writes of `sent` (as `wait` left it) put there, and nothing
    else (an entry refused as a duplicate belongs to someone else). updates_for(gw) gives the undoing updates in
    reverse order of the updates they undo."""
    for gw, _, applied in sent:
        back = [u for u, ok in zip(updates_for(gw), reversed(applied)) if ok]
        if not back:
            continue
        try:
            gw.switch.write_async(back).result()
        except Exception as e:
            log.warning("undoing a failed setup on %s: %s", gw.name, e)


def remove_phase(removals, failures):
    """Removals ({gateway: [(what, write)]}, each write one call that removes something, collected into one
    Write per gateway), sent to all gateways at once and waited for. What failed is added to `failures` as
    "what: message"; a removal whose `what` is None may find its entry gone already (selectors: removed with
    their entry's removal)."""
    writes, labels = [], []
    for gw, items in removals.items():
        if not items:
            continue
        with gw.switch.collect() as ups:
            names = []
            for what, write in items:
                n = len(ups)
                try:
                    write()
                except Exception as e:      # a removal that could not even be written down
                    failures.append(f"{what or 'selectors'}: {e}")
                names += [what] * (len(ups) - n)
        if ups:
            writes.append((gw, ups))
            labels.append(names)
    if not writes:
        return
    sent = send(writes)
    for i in answer_order(sent):
        try:
            sent[i][2].result()
        except Exception as e:
            errors = getattr(e, "errors", None)
            if errors is None or len(errors) != len(labels[i]):
                errors = [str(e)] * len(labels[i])
            for what, err in zip(labels[i], errors):
                if err is None or (what is None and "no entry with this match" in err):
                    continue
                failures.append(f"{what or 'selectors'}: {err}")
