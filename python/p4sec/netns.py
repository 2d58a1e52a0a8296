"""Small helpers for the demos, benchmarks and tests that build network namespaces: run a command (in a
namespace) and pick a free local TCP port for a switch's P4Runtime server."""
import socket
import subprocess


def sh(*cmd, check=True):
    """Run a command; its output captured as text."""
    return subprocess.run(cmd, check=check, capture_output=True, text=True)


def ns(name, *cmd, check=True):
    """Run a command inside network namespace `name`."""
    return sh("ip", "netns", "exec", name, *cmd, check=check)


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p
