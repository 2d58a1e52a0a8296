"""Build STF tests from scapy frames and run them through `p4sec stf`."""
import pathlib
import subprocess


class Stf:
    def __init__(self):
        self.lines = []

    def add(self, line):
        self.lines.append(line)

    def packet(self, port, frame):
        self.lines.append(f"packet {port} {bytes(frame).hex()}")

    def expect(self, port, frame):
        # `$`: the frame must end here (nothing appended)
        self.lines.append(f"expect {port} {bytes(frame).hex()} $")

    def run(self, p4sec_bin, program, tmp_path):
        path = pathlib.Path(tmp_path) / "test.stf"
        path.write_text("\n".join(self.lines) + "\n")
        return subprocess.run([str(p4sec_bin), "stf", str(program), str(path)], capture_output=True, text=True, timeout=120)
