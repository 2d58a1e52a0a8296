"""`p4sec switch` at start: each way its P4Runtime server cannot start (an address in use, a malformed address, an
unreadable or malformed TLS file) is one line naming the cause and the flag to change, before the switch says it
listens; `--grpc` takes host names as p4runtime-shell writes them (localhost:9559); `--port 1 veth1` (a space
for the `=`) is refused naming the form, not read as a program file."""
import socket
import subprocess

from p4sec.infra.netns import free_port


def run(p4sec_bin, *args, timeout=30):
    return subprocess.run([str(p4sec_bin), "switch", *args], capture_output=True, text=True, timeout=timeout)


def test_grpc_address_in_use_names_the_flag(p4sec_bin):
    port = free_port()
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        s.listen()
        r = run(p4sec_bin, "--grpc", f"127.0.0.1:{port}")
    assert r.returncode != 0
    assert "in use" in r.stderr and "--grpc ADDR" in r.stderr and f"127.0.0.1:{port}" in r.stderr, r.stderr
    # said before any claim that it listens, and not tonic's bare "transport error"
    assert "P4Runtime (device" not in r.stderr and "transport error" not in r.stderr


def test_metrics_address_in_use_names_the_flag(p4sec_bin):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = run(p4sec_bin, "--grpc", "127.0.0.1:0", "--metrics", f"localhost:{port}")
    assert r.returncode != 0 and f"127.0.0.1:{port}" in r.stderr and "--metrics ADDR" in r.stderr, r.stderr


def test_grpc_hostname_is_accepted(p4sec_bin):
    port = free_port()
    p = subprocess.Popen([str(p4sec_bin), "switch", "--grpc", f"localhost:{port}"], stderr=subprocess.PIPE, text=True)
    try:
        import grpc
        ch = grpc.insecure_channel(f"localhost:{port}")
        grpc.channel_ready_future(ch).result(timeout=30)  # it listens
        ch.close()
        assert p.poll() is None
    finally:
        p.terminate()
        err = p.communicate(timeout=10)[1]
    assert "P4Runtime (device 1) on" in err and f":{port}" in err


def test_malformed_grpc_addresses_are_named(p4sec_bin):
    for bad, why in (("nonsense", "no port"), ("localhost:http", "not a port number"), (":9559", "no host")):
        r = run(p4sec_bin, "--grpc", bad)
        assert r.returncode == 2, (bad, r.stderr)
        assert "--grpc takes HOST:PORT" in r.stderr, r.stderr
        assert why in r.stderr, (bad, r.stderr)
        assert r.stderr.count("\n") == 1, r.stderr   # one line


def test_port_with_a_space_for_the_equals_sign(p4sec_bin):
    r = run(p4sec_bin, "--port", "1", "veth1")
    assert r.returncode == 2
    assert "--port 1=veth1" in r.stderr and "`veth1` was read as the program file" in r.stderr, r.stderr


def test_bad_tls_files_are_named(p4sec_bin, tmp_path):
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    r = run(p4sec_bin, "--grpc", f"127.0.0.1:{free_port()}", "--tls-cert", str(tmp_path / "missing.pem"), "--tls-key", str(junk))
    assert r.returncode != 0 and "--tls-cert" in r.stderr and "missing.pem" in r.stderr, r.stderr
    r = run(p4sec_bin, "--grpc", f"127.0.0.1:{free_port()}", "--tls-cert", str(junk), "--tls-key", str(junk))
    assert r.returncode != 0 and "not a PEM certificate (--tls-cert)" in r.stderr, r.stderr
    assert "P4Runtime (device" not in r.stderr


def test_a_pcap_port_is_up(p4sec_bin, tmp_path):
    """A pcap port has no descriptor to poll; it was once reported down (to the log and to watch ports)."""
    import time
    log = tmp_path / "switch.log"
    p = subprocess.Popen([str(p4sec_bin), "switch", "--grpc", "127.0.0.1:0", "--log", "debug",
                          "--port", f"1=pcap:out={tmp_path / 'out.pcap'}"], stderr=open(log, "w"))
    try:
        deadline = time.time() + 30      # the datapath looks at every port once a second
        while "port 1 is " not in log.read_text() and time.time() < deadline and p.poll() is None:
            time.sleep(0.1)
    finally:
        p.terminate()
        p.wait(timeout=10)
    err = log.read_text()
    assert "port 1 is up" in err and "port 1 is down" not in err, err
