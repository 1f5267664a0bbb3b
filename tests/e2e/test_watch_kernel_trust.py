"""`burnin watch --kernel-log FILE --no-nvml --dry-run` acts only on the kernel's own lines about this node.

Each forged line is written to the followed file before a genuine kernel line that is only recorded (the
sentinel); the lines are read in order and an eviction is handled before any record, so once the
sentinel is on stdout anything the forged line caused is there too. Each forged line's genuine twin
(the same text as the kernel writes it) does evict, so no test passes because nothing acts at all.
The node is a simulated H100 node: its sysfs lists the GPUs, HCAs and IPoIB netdevs the lines name.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from burnin.sim import SimNode, build_node
from burnin.topology import find_topology

BURNIN = [sys.executable, "-m", "burnin.cli.main"]
GPU_52, GPU_1B = "0000:52:00", "0000:1b:00"  # gpu2 and gpu0 of the simulated node
XID_79 = f"NVRM: Xid (PCI:{GPU_52}): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
XID_94 = f"NVRM: Xid (PCI:{GPU_52}): 94, pid=4242, name=python3, Contained ECC error."
XID_63 = (f"NVRM: Xid (PCI:{GPU_1B}): 63, pid=1896, Row Remapper: New row marked for remapping, "
          "reset gpu to activate.")
SENTINEL = f"record GPU-04 PCI {GPU_1B} Xid 63"
SXID_FATAL = ("nvidia-nvswitch0: SXid (PCI:0000:83:00.0): 24007, Fatal, Link 40 sourcetrack TCEN0 crumbstore "
              "ECC DBE Error")


class Watch:
    """A running `burnin watch` following ``log`` (absent at start: it reads the whole file once it appears)."""

    def __init__(self, node: SimNode, work: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.log = work / "kernel.log"
        self.state = work / "state"
        self.stdout_path, self.stderr_path = work / "out.txt", work / "err.txt"
        full_env = {**os.environ, **node.environment(), **(env or {})}
        with self.stdout_path.open("w") as out, self.stderr_path.open("w") as err:
            self.proc = subprocess.Popen(
                [*BURNIN, "watch", "--node", "sim01", "--kernel-log", str(self.log), "--no-nvml", "--dry-run",
                 "--probe-interval", "3600", "--state-dir", str(self.state), *args],
                env=full_env, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        self.wait_for("the watch looking for its log", lambda: "No such file" in self.err())

    def out(self) -> str:
        return self.stdout_path.read_text()

    def err(self) -> str:
        return self.stderr_path.read_text()

    def write(self, lines: list[str]) -> None:
        """The whole log at once (a rename), so the watch reads it from its first line."""
        fresh = self.log.with_name("kernel.log.new")
        fresh.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
        os.replace(fresh, self.log)

    def journal(self) -> list[dict]:  # type: ignore[type-arg]
        path = self.state / "events.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def wait_for(self, what: str, check: Callable[[], bool], timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if check():
                return
            if self.proc.poll() is not None:
                pytest.fail(f"watch exited {self.proc.returncode} waiting for {what}: {self.err()}")
            time.sleep(0.05)
        pytest.fail(f"no {what} within {timeout:g} s; stdout: {self.out()!r}; stderr: {self.err()!r}")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> SimNode:
    return build_node(tmp_path_factory.mktemp("trust") / "node", find_topology("hgx-h100-8gpu"), "sim01")


@pytest.fixture
def watch(tmp_path: Path, node: SimNode) -> Iterator[Callable[..., Watch]]:
    started: list[Watch] = []

    def start(*args: str, env: dict[str, str] | None = None) -> Watch:
        work = tmp_path / f"watch{len(started)}"
        work.mkdir()
        started.append(Watch(node, work, *args, env=env))
        return started[-1]

    yield start
    for w in started:
        w.stop()


def _syslog(tag: str, message: str) -> str:
    return f"Dec  1 13:00:00 sim01 {tag}: {message}"


def _kmsg(pri: int, seq: int, message: str) -> str:
    return f"{pri},{seq},{1_000_000 + seq},-;{message}"


# (forged line, the file's sentinel line): the sentinel is in the same format, a genuine kernel line.
FORGED = {
    # `logger -t alice 'NVRM: Xid ...'`: any user can write this into the syslog.
    "syslog-line-of-an-ordinary-program": (
        _syslog("alice", XID_94), _syslog("kernel", XID_63)),
    # written to /dev/kmsg from user space: the kernel gives it the user facility (PRI 12 = user.warning).
    "kmsg-record-with-the-user-facility": (
        _kmsg(12, 1, XID_79), _kmsg(4, 2, XID_63)),
    # the kernel's own segfault line, quoting a library file named after the pattern.
    "segfault-line-quoting-the-pattern": (
        _kmsg(6, 1, f"a.out[4242]: segfault at 0 ip 00007f0000001000 sp 00007ffc00000000 error 4 in {XID_79}"
                    ".so[7f0000000000+1000]"),
        _kmsg(4, 2, XID_63)),
    # sudo logs the command line it ran.
    "sudo-line-quoting-the-pattern": (
        _syslog("sudo", f"   alice : TTY=pts/0 ; PWD=/home/alice ; USER=root ; COMMAND=/usr/bin/echo {XID_79}"),
        _syslog("kernel", XID_63)),
    # the kernel's AppArmor audit line names a file the user created; ib0 and an IPoIB netdev of this node.
    "apparmor-audit-naming-a-file-ib0-lost-carrier": (
        _kmsg(5, 1, 'audit: type=1400 audit(1700000000.000:42): apparmor="DENIED" operation="open" '
                    'profile="/usr/bin/foo" name="/tmp/ib0: lost carrier" pid=4242 comm="foo" requested_mask="r"'),
        _kmsg(4, 2, XID_63)),
    "apparmor-audit-naming-a-file-after-a-netdev-of-this-node": (
        _kmsg(5, 1, 'audit: type=1400 audit(1700000000.000:42): apparmor="DENIED" operation="open" '
                    'profile="/usr/bin/foo" name="/tmp/ibp24s0: lost carrier" pid=4242 comm="foo"'),
        _kmsg(4, 2, XID_63)),
    # a kernel line that carries an NVSwitch's fatal SXid inside another message.
    "sxid-inside-another-line": (
        _kmsg(5, 1, f'audit: type=1309 audit(1700000000.000:43): argc=2 a0="echo" a1="{SXID_FATAL}"'),
        _kmsg(4, 2, XID_63)),
    "sxid-inside-a-syslog-line-of-another-program": (
        _syslog("bob", SXID_FATAL), _syslog("kernel", XID_63)),
    # a daemon (facility 3) writing to /dev/kmsg as root: still not the kernel.
    "kmsg-record-with-the-daemon-facility": (
        _kmsg(28, 1, XID_79), _kmsg(4, 2, XID_63)),
}


@pytest.mark.parametrize("case", sorted(FORGED))
def test_a_forged_line_is_not_acted_on(watch: Callable[..., Watch], case: str) -> None:
    forged, sentinel = FORGED[case]
    w = watch()
    w.write([forged, sentinel])
    w.wait_for("the sentinel", lambda: SENTINEL in w.out())
    assert w.stop() == 0
    assert "EVICT" not in w.out() and "DRAIN" not in w.out() and "scontrol" not in w.out()
    assert [(e["code"], e["action"]) for e in w.journal()] == [(63, "record")]


# The genuine twins: the same events as the kernel writes them act.
GENUINE = {
    "syslog-kernel-tag": (_syslog("kernel", XID_94), "EVICT GPU-04 PCI 0000:52:00 Xid 94"),
    "kmsg-kernel-facility": (_kmsg(4, 1, XID_79), "EVICT GPU-04 PCI 0000:52:00 Xid 79"),
    "dmesg-capture": (f"[  523.280204] {XID_79}", "EVICT GPU-04 PCI 0000:52:00 Xid 79"),
    "ipoib-carrier-of-a-netdev-of-this-node": (_kmsg(6, 1, "ibp24s0: lost carrier"), "EVICT IB-01 ibp24s0 port down"),
    "nvswitch-fatal-sxid-headline": (_kmsg(3, 1, SXID_FATAL), "EVICT INV-04 nvidia-nvswitch0 fatal SXid 24007"),
    "mlx5-cable-unplugged": (_kmsg(4, 1, "mlx5_core 0000:4f:00.0: Port module event: module 0, Cable unplugged"),
                             "EVICT IB-01 mlx5_"),
}


@pytest.mark.parametrize("case", sorted(GENUINE))
def test_the_genuine_kernel_line_acts(watch: Callable[..., Watch], case: str) -> None:
    line, expected = GENUINE[case]
    w = watch()
    w.write([line])
    w.wait_for("the eviction", lambda: expected in w.out())
    assert "'Reason=burnin: " in w.out()


def test_an_xid_of_a_gpu_that_is_not_this_nodes_is_recorded_not_acted_on(watch: Callable[..., Watch]) -> None:
    w = watch()
    other = "NVRM: Xid (PCI:0000:9c:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
    w.write([_kmsg(4, 1, other), _kmsg(4, 2, XID_63)])
    w.wait_for("the sentinel", lambda: SENTINEL in w.out())
    assert w.stop() == 0
    assert "EVICT" not in w.out() and "scontrol" not in w.out()
    foreign, sentinel = w.journal()
    assert (foreign["code"], foreign["device"], foreign["class"], foreign["action"]) == (79, "0000:9c:00", "record",
                                                                                       "record")
    assert "not a GPU of this node" in foreign["cause"]
    assert sentinel["code"] == 63


def test_a_syslog_file_given_as_a_dmesg_capture_trusts_nothing_but_its_kernel_tag(
        watch: Callable[..., Watch]) -> None:
    """--kernel-log-format syslog on a file whose first line looks like nothing: the header is still required."""
    w = watch("--kernel-log-format", "syslog")
    w.write([XID_79, _syslog("alice", XID_79), _syslog("kernel", XID_63)])
    w.wait_for("the sentinel", lambda: SENTINEL in w.out())
    assert w.stop() == 0
    assert "EVICT" not in w.out()


def _reference_lines(reference_dir: Path, name: str) -> list[str]:
    return (reference_dir / "dmesg" / name).read_text(encoding="utf-8").splitlines()


def _gpu_root(root: Path, buses: list[str]) -> dict[str, str]:
    """A sysfs tree listing ``buses`` as NVIDIA GPUs (vendor 0x10de, class 3D controller): the node's GPUs."""
    for bus in buses:
        device = root / "sys/bus/pci/devices" / f"{bus}.0"
        device.mkdir(parents=True)
        (device / "vendor").write_text("0x10de\n")
        (device / "class").write_text("0x030200\n")
    return {"BURNIN_ROOT": str(root)}


def test_genuine_kernel_lines_of_the_reference_logs_still_act(watch: Callable[..., Watch], reference_dir: Path,
                                                              tmp_path: Path) -> None:
    """The real dmesg captures (dmesg -T, a bare NVRM line, dmesg --decode --time-format iso), on a node whose
    sysfs lists the GPUs they name: the Xid 119 evicts, the Xid 63, 13 and 43 are recorded."""
    env = _gpu_root(tmp_path / "root", ["0000:9b:00", "0000:10:1c", "0000:38:00"])
    w = watch("--kernel-log-format", "dmesg", env=env)
    w.write(_reference_lines(reference_dir, "dmesg-T-xid119-gsp-rpc-timeout-h100.txt")
            + _reference_lines(reference_dir, "xid63-row-remapper-a100.txt")
            + _reference_lines(reference_dir, "dmesg-decode-time-format-iso-xid13-and-misc.txt"))
    w.wait_for("the Xid 43 record", lambda: "record GPU-04 PCI 0000:38:00 Xid 43" in w.out())
    assert w.stop() == 0
    out = w.out()
    assert "EVICT GPU-04 PCI 0000:9b:00 Xid 119" in out
    assert "record GPU-04 PCI 0000:10:1c Xid 63" in out and "record GPU-04 PCI 0000:38:00 Xid 13" in out
    assert out.count("State=DRAIN") == 1


def test_the_ib_link_flap_of_the_reference_syslog_comes_from_a_program(watch: Callable[..., Watch],
                                                                       reference_dir: Path) -> None:
    """systemd-networkd's 'ib6: lost carrier' (syslog) is a program's line: not acted on, whatever its text."""
    w = watch()
    w.write([*_reference_lines(reference_dir, "syslog-ib-link-flap-ndv4-azure-nhc.txt"), _syslog("kernel", XID_63)])
    w.wait_for("the sentinel", lambda: SENTINEL in w.out())
    assert w.stop() == 0
    assert "IB-01" not in w.out() and [e["code"] for e in w.journal()] == [63]
