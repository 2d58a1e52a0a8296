"""A P4-tutorials-style mininet run, as a script (root; Debian's mininet package): two hosts and two switches,
h1 - s1 - s2 - h2, the switches started by a mininet Switch class written here that launches the program named
`simple_switch_grpc` with the command line the tutorials' switch class builds (`-i N@IFACE ... --pcap DIR
--nanolog ipc:///tmp/bm-N-log.ipc --device-id N PROGRAM.json --log-console --thrift-port P -- --grpc-server-addr
0.0.0.0:G`, output to logs/sN.log), and the programs loaded the tutorials' way: SetForwardingPipelineConfig with
the program in BMv2's device config (`p4.tmp.P4DeviceConfig`), then table entries over P4Runtime.

    python mn_tutorial.py CONFIG.json      # prints one JSON object: what happened

CONFIG: {"workdir", "bin_dir" (holds simple_switch_grpc), "router": [json, p4info], "ecn": [json, p4info],
"tool" (the queue tests' raw-socket sender/receiver), "grpc": [port, port], "thrift": [port, port]}.

Phase 1 (the basic exercise): the IPv4 router on both switches, routes written, h1 pings h2. Phase 2 (the ecn
exercise): tests/switch/programs/queue_ecn.p4 pushed to both, and h1 sends a burst to h2 over the link from s2 to
h2, which is slow: the links are mininet's TCLink, as in the tutorials (`delay="0ms"` everywhere, `bw=1` on that
one), so mininet shapes it with htb at 1 Mbit/s (its netem part fails on a kernel without netem: mininet prints
the error and goes on, as it does there). h2's frames carry the queue depth s2 saw (each switch writes its own
into the frame: the last one shows) and the ECN mark."""
import json
import os
import queue
import socket
import subprocess
import sys
import time

sys.path.append("/usr/lib/python3/dist-packages")  # Debian's mininet (the venv does not see the system's)

os.environ.setdefault("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")
import grpc  # noqa: E402
from google.protobuf import text_format  # noqa: E402
from mininet.link import TCLink  # noqa: E402
from mininet.net import Mininet  # noqa: E402
from mininet.node import Switch  # noqa: E402
from mininet.topo import Topo  # noqa: E402
from p4.config.v1 import p4info_pb2  # noqa: E402
from p4.tmp import p4config_pb2  # noqa: E402
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc  # noqa: E402


class P4RuntimeSwitch(Switch):
    """A BMv2 switch as the tutorials run it: the command line of their switch class, its output in
    logs/NAME.log; the gRPC server is waited for before the switch counts as started."""

    def __init__(self, name, sw_path=None, json_path=None, grpc_port=None, thrift_port=None, pcap_dump=None,
                 log_dir=None, device_id=0, **kw):
        Switch.__init__(self, name, **kw)
        self.sw_path, self.json_path, self.grpc_port, self.thrift_port = sw_path, json_path, grpc_port, thrift_port
        self.pcap_dump, self.log_dir, self.device_id = pcap_dump, log_dir, device_id
        self.sw_pid = None

    def start(self, controllers):
        args = [self.sw_path]
        for port, intf in self.intfs.items():
            if intf.name != "lo" and not intf.IP():
                args += ["-i", f"{port}@{intf.name}"]
        if self.pcap_dump:
            args.append(f"--pcap {self.pcap_dump}")
        args += ["--nanolog", f"ipc:///tmp/bm-{self.device_id}-log.ipc", "--device-id", str(self.device_id)]
        args.append(self.json_path if self.json_path else "--no-p4")
        args.append("--log-console")
        if self.thrift_port:
            args.append(f"--thrift-port {self.thrift_port}")
        args.append(f"-- --grpc-server-addr 0.0.0.0:{self.grpc_port}")
        log = os.path.join(self.log_dir, f"{self.name}.log")
        self.sw_pid = int(self.cmd(" ".join(args) + f" > {log} 2>&1 & echo $!").strip().split()[-1])
        deadline = time.time() + 20
        while time.time() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.grpc_port)) == 0:
                    return
            time.sleep(0.1)
        raise RuntimeError(f"{self.name}: no gRPC server on {self.grpc_port}: {open(log).read()[-2000:]}")

    def stop(self, deleteIntfs=True):
        if self.sw_pid:
            self.cmd(f"kill {self.sw_pid}; while kill -0 {self.sw_pid} 2>/dev/null; do sleep 0.05; done")
        Switch.stop(self, deleteIntfs)


class Line(Topo):
    def build(self, cfg):
        s = []
        for i in (1, 2):
            s.append(self.addSwitch(f"s{i}", cls=P4RuntimeSwitch, sw_path=os.path.join(cfg["bin_dir"], "simple_switch_grpc"),
                                    json_path=cfg["router"][0], grpc_port=cfg["grpc"][i - 1], thrift_port=cfg["thrift"][i - 1],
                                    pcap_dump=os.path.join(cfg["workdir"], "pcaps"), log_dir=os.path.join(cfg["workdir"], "logs"),
                                    device_id=i - 1))
        h1 = self.addHost("h1", ip="10.0.1.1/24", mac="08:00:00:00:01:11")
        h2 = self.addHost("h2", ip="10.0.2.2/24", mac="08:00:00:00:02:22")
        self.addLink(h1, s[0], port2=1, delay="0ms")
        self.addLink(s[0], s[1], port1=2, port2=2, delay="0ms")
        self.addLink(h2, s[1], port2=1, delay="0ms", bw=1)


class Conn:
    """A P4Runtime connection as the tutorials' switch connection makes it: a queue-fed stream channel
    (primary, election id 1), the pipeline pushed in BMv2's device config, entries written by name."""

    def __init__(self, port, device_id):
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        self.stub = p4runtime_pb2_grpc.P4RuntimeStub(self.channel)
        self.device_id = device_id
        self.q = queue.Queue()
        self.stream = self.stub.StreamChannel(iter(self.q.get, None))
        req = p4runtime_pb2.StreamMessageRequest()
        req.arbitration.device_id, req.arbitration.election_id.low = device_id, 1
        self.q.put(req)
        next(self.stream)

    def set_pipeline(self, program, p4info_path):
        self.info = p4info_pb2.P4Info()
        with open(p4info_path) as f:
            text_format.Merge(f.read(), self.info)
        dev = p4config_pb2.P4DeviceConfig(reassign=True)
        with open(program, "rb") as f:
            dev.device_data = f.read()
        req = p4runtime_pb2.SetForwardingPipelineConfigRequest(
            device_id=self.device_id, action=p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT)
        req.election_id.low = 1
        req.config.p4info.CopyFrom(self.info)
        req.config.p4_device_config = dev.SerializeToString()
        self.stub.SetForwardingPipelineConfig(req)

    def route(self, prefix, plen, dmac, port):
        t = next(t for t in self.info.tables if t.preamble.name == "RouterIngress.ipv4_lpm")
        a = next(a for a in self.info.actions if a.preamble.name == "RouterIngress.set_nhop")
        req = p4runtime_pb2.WriteRequest(device_id=self.device_id)
        req.election_id.low = 1
        e = req.updates.add(type=p4runtime_pb2.Update.INSERT).entity.table_entry
        e.table_id = t.preamble.id
        m = e.match.add(field_id=t.match_fields[0].id)
        m.lpm.value, m.lpm.prefix_len = socket.inet_aton(prefix), plen
        e.action.action.action_id = a.preamble.id
        vals = {"dst_mac": bytes.fromhex(dmac.replace(":", "")), "src_mac": bytes.fromhex("0200000000fe"), "port": bytes([0, port])}
        for p in a.params:
            e.action.action.params.add(param_id=p.id, value=vals[p.name])
        self.stub.Write(req)

    def close(self):
        self.q.put(None)
        self.channel.close()


def main():
    cfg = json.load(open(sys.argv[1]))
    for d in ("pcaps", "logs"):
        os.makedirs(os.path.join(cfg["workdir"], d), exist_ok=True)
    # interfaces of an earlier run that did not end cleanly (only the names this topology uses)
    for n in ("s1-eth1", "s1-eth2", "s2-eth1", "s2-eth2"):
        subprocess.run(["ip", "link", "del", n], capture_output=True)
    net = Mininet(topo=Line(cfg), link=TCLink, controller=None, autoSetMacs=False)
    out = {}
    conns = []
    try:
        net.start()
        h1, h2 = net.get("h1"), net.get("h2")
        for h, gw in ((h1, "10.0.1.254"), (h2, "10.0.2.254")):
            h.cmd(f"ip neigh replace {gw} lladdr 02:00:00:00:00:fe dev {h.defaultIntf()}")
            h.cmd(f"ip route add default via {gw}")
            h.cmd(f"sysctl -qw net.ipv6.conf.all.disable_ipv6=1")
        # phase 1, basic: the router pushed (again, as the tutorials' controller does) and routes written
        conns = [Conn(cfg["grpc"][i], i) for i in (0, 1)]
        for c in conns:
            c.set_pipeline(*cfg["router"])
        conns[0].route("10.0.1.1", 32, "08:00:00:00:01:11", 1)
        conns[0].route("10.0.2.0", 24, "02:00:00:00:00:02", 2)
        conns[1].route("10.0.2.2", 32, "08:00:00:00:02:22", 1)
        conns[1].route("10.0.1.0", 24, "02:00:00:00:00:01", 2)
        out["ping"] = h1.cmd("ping -c 3 -W 2 10.0.2.2")
        # phase 2, ecn: the queue program on both, a burst h1 -> h2 over the slow s2-h2 link
        for c in conns:
            c.set_pipeline(*cfg["ecn"])
        out["shaping"] = net.get("s2").cmd("tc qdisc show dev s2-eth1; tc class show dev s2-eth1")
        recv = h2.popen([sys.executable, cfg["tool"], "recv", str(h2.defaultIntf()), "600", "4"], stdout=subprocess.PIPE, text=True)
        assert recv.stdout.readline().strip() == "ready"
        h1.cmd(f"{sys.executable} {cfg['tool']} send {h1.defaultIntf()} 600 0 1")
        out["ecn_frames"] = [line.strip() for line in recv.stdout if line.strip()]
        recv.wait(timeout=60)
    finally:
        for c in conns:
            c.close()
        net.stop()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
