"""Small helpers for the agent, demos, benchmarks and tests that build network namespaces: run a command (in a
namespace), run Python code in one (`in_netns`) and pick a free local TCP port for a switch's P4Runtime server."""
import contextlib
import ctypes
import os
import pathlib
import random
import socket
import subprocess

CLONE_NEWNET = 0x40000000


class CommandError(subprocess.CalledProcessError):
    """A command exited non-zero; its message names the command (shortened), the exit status and what it printed
    on stderr (or stdout)."""

    def __str__(self):
        cmd = [str(c) for c in self.cmd]
        shown = " ".join(cmd[:6]) + (" ..." if len(cmd) > 6 else "")
        said = (self.stderr or self.stdout or "").strip()[:500]
        return f"{shown} failed (exit {self.returncode})" + (f": {said}" if said else "")


def sh(*cmd, check=True, input=None, timeout=None):
    """Run a command (its arguments strings, paths or numbers); its output captured as text (`input`: text for
    its stdin). With `check`, a non-zero exit raises CommandError; past `timeout` seconds it is killed and
    subprocess.TimeoutExpired raised."""
    cmd = [str(c) for c in cmd]
    r = subprocess.run(cmd, capture_output=True, text=True, input=input, timeout=timeout)
    if check and r.returncode:
        raise CommandError(r.returncode, cmd, r.stdout, r.stderr)
    return r


def ns(name, *cmd, check=True, input=None, timeout=None):
    """Run a command inside network namespace `name`."""
    return sh("ip", "netns", "exec", name, *cmd, check=check, input=input, timeout=timeout)


_handed_out = set()


def _port_range():
    """Where free_port looks: below the kernel's ephemeral range (32768-60999 unless configured), else above it,
    else (an ephemeral range that leaves no room) anywhere from 10000."""
    try:
        lo, hi = (int(x) for x in pathlib.Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        lo, hi = 32768, 60999
    if lo - 10000 >= 2000:
        return 10000, lo
    if 65535 - hi >= 2000:
        return hi + 1, 65536
    return 10000, 65536


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on right now, for a server started next (a switch's P4Runtime
    address). Chosen outside the kernel's ephemeral range, so that no connection made in between (gRPC clients,
    iperf3) is given it, and never the same one twice in a process, so two servers started one after the other
    cannot be handed one port (bind(0) can give it again once the probing socket is closed)."""
    lo, hi = _port_range()
    for _ in range(1000):
        p = random.randrange(lo, hi)
        if p in _handed_out:
            continue
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", p))
        except OSError:
            continue
        finally:
            s.close()
        _handed_out.add(p)
        return p
    raise RuntimeError(f"free_port: no free TCP port in {lo}..{hi - 1}")


_libc = None


@contextlib.contextmanager
def in_netns(name):
    """Run the body in network namespace `name` (this thread only); sockets created there stay in it."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(f"/var/run/netns/{name}", os.O_RDONLY)
    try:
        if _libc.setns(target, CLONE_NEWNET) != 0:
            e = ctypes.get_errno()
            raise OSError(e, f"setns {name}: {os.strerror(e)}")
        yield
    finally:
        _libc.setns(home, CLONE_NEWNET)
        os.close(home)
        os.close(target)
