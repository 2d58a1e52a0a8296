"""Small helpers for the agent, demos, benchmarks and tests that build network namespaces: run a command (in a
namespace), run Python code in one (`in_netns`) and pick a free local TCP port for a switch's P4Runtime server."""
import contextlib
import ctypes
import os
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


def sh(*cmd, check=True, input=None):
    """Run a command (its arguments strings, paths or numbers); its output captured as text (`input`: text for
    its stdin). With `check`, a non-zero exit raises CommandError."""
    cmd = [str(c) for c in cmd]
    r = subprocess.run(cmd, capture_output=True, text=True, input=input)
    if check and r.returncode:
        raise CommandError(r.returncode, cmd, r.stdout, r.stderr)
    return r


def ns(name, *cmd, check=True, input=None):
    """Run a command inside network namespace `name`."""
    return sh("ip", "netns", "exec", name, *cmd, check=check, input=input)


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


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
