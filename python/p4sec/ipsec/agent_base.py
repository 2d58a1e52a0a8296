"""What the parts of `p4sec-agent` share (p4sec.ipsec.agent and its backends, p4sec.ipsec.agent_userspace and
p4sec.ipsec.agent_xfrm): the agent's error, the thread that renews on lifetime reports, and the delayed removal of
an old inbound SA."""
import sys
import threading


class AgentError(Exception):
    """What the agent reports and exits 1 for (one line on stderr)."""


GRACE = 1.0     # seconds an old inbound SA stays after the gateway switched to the new one (packets in flight)


def start_renewer(events, renew):
    """A thread that calls renew() for each report put in `events` (reports that pile up while one renewal runs
    lead to one renewal) until None is put."""
    def run():
        while True:
            if events.get() is None:
                return
            while not events.empty():
                if events.get_nowait() is None:
                    return
            try:
                renew()
            except AgentError as e:
                print(f"p4sec-agent: renewal failed: {e}", file=sys.stderr, flush=True)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def retire_after(seconds, retire):
    """Run retire() after `seconds` in the background; its failure is reported, never raised."""
    def run():
        try:
            retire()
        except Exception as e:
            print(f"p4sec-agent: removing the old inbound SA failed: {e}", file=sys.stderr, flush=True)
    t = threading.Timer(seconds, run)
    t.daemon = True
    t.start()
    return t
