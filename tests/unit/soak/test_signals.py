"""A monitoring sample read from the collector's facts: every BRN-07 signal, unread values kept as None."""

from __future__ import annotations

from typing import Any

from burnin.facts import Facts
from burnin.soak.signals import NodeSample, kernel_events, read_sample

DMESG = """[ 1000.000001] NVRM: GPU at PCI:0000:1b:00: GPU-abc
[ 3600.500000] NVRM: Xid (PCI:0000:1b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.
[ 3700.000000] mce: [Hardware Error]: Machine check events logged
[ 3700.100000] EDAC MC0: 1 UE memory read error on CPU_SrcID#0_MC#0_Chan#1_DIMM#0
[ 3701.000000] EDAC MC1: 1 CE memory read error on CPU_SrcID#1_MC#0_Chan#0_DIMM#0
[ 3702.000000] pcieport 0000:00:01.0: AER: Uncorrected (Non-Fatal) error received: 0000:01:00.0
[ 3703.000000] pcieport 0000:00:01.0: AER: Corrected error received: 0000:01:00.0
"""


def facts(**overrides: Any) -> dict[str, Any]:
    gpu = {"index": 0, "bus_id": "0000:1b:00.0", "lost": False, "temperature_c": 61,
           "temperature_thresholds": {"gpu_max": 85, "slowdown": 87},
           "clock_event_reasons": 0, "ecc_errors": {"volatile_corrected": 3, "volatile_uncorrected": 0,
                                                    "sram_aggregate_uncorrected": 0},
           "remapped_rows": {"pending": False, "failure": False},
           "nvlink": [{"link": k, "active": True, "replay": 1, "recovery": 0, "crc_flit": 2} for k in range(18)]}
    data: dict[str, Any] = {
        "sources": {"nvml": {"ok": True}},
        "nvml": {"gpus": [gpu]},
        "gpu_telemetry": {"gpus": [{"index": 0, "power_mw": 650500, "pcie_replay": 4, "memory_max_c": 95,
                                    "memory_temperature_c": 70}]},
        "host_health": {"uptime_s": 4000.0, "boot_id": "b-1", "edac_present": True,
                        "edac": {"mc0": {"ce_count": 1, "ue_count": 1}, "mc1": {"ce_count": 2, "ue_count": 0}}},
        "infiniband": {"hcas": {"mlx5_0": {"ports": {"1": {"counters": {"link_downed": 0, "symbol_error": 5}}}}}},
        "commands": {"kernel-events": {"stdout": DMESG, "exit_status": 0, "error": None}},
    }
    data.update(overrides)
    return data


def test_every_signal_is_read() -> None:
    s = read_sample(Facts("n1", facts()), t=600.0, stage="gpu", attempt=0)
    gpu = s.gpus[0]
    assert (gpu.temperature_c, gpu.gpu_max_c, gpu.memory_temperature_c, gpu.memory_max_c) == (61, 85, 70, 95)
    assert (gpu.power_w, gpu.pcie_replay, gpu.ecc_corrected, gpu.ecc_uncorrected) == (650.5, 4, 3, 0)
    assert (gpu.nvlink_replay, gpu.nvlink_recovery, gpu.nvlink_crc) == (18, 0, 36)
    assert (s.uptime_s, s.boot_id, s.edac_ce, s.edac_ue) == (4000.0, "b-1", 3, 1)
    assert s.ib == {"mlx5_0": {"link_downed": 0, "symbol_error": 5}}
    assert [e.kind for e in s.kernel] == ["xid", "mce", "edac-ue", "edac-ce", "aer-uncorrected", "aer-corrected"]
    assert NodeSample.from_json(s.to_json()) == s


def test_event_time_maps_the_kernel_stamp_onto_the_soak_clock() -> None:
    s = read_sample(Facts("n1", facts()), t=600.0, stage="gpu", attempt=0)
    xid = s.kernel[0]
    assert (xid.xid, xid.pci, xid.uptime_s) == (79, "0000:1b:00", 3600.5)
    assert s.event_time(xid) == 600.0 - (4000.0 - 3600.5)
    unstamped = kernel_events("NVRM: Xid (PCI:0000:1b:00): 13, pid=1, name=x, text\n")[0]
    assert unstamped.uptime_s is None and s.event_time(unstamped) == 600.0


def test_nvml_missing_falls_back_to_dmon_for_power_and_temperatures() -> None:
    dmon = ("# gpu    pwr  gtemp  mtemp\n# Idx      W      C      C\n    0    702     66     71\n")
    data = facts(nvml=None, gpu_telemetry=None)
    data["commands"]["dmon"] = {"stdout": dmon, "exit_status": 0}
    gpu = read_sample(Facts("n1", data), t=0.0, stage="", attempt=0).gpus[0]
    assert (gpu.power_w, gpu.temperature_c, gpu.memory_temperature_c) == (702, 66, 71)
    assert gpu.ecc_corrected is None and gpu.clock_reasons is None  # not measured: None, never 0


def test_unread_sources_stay_unknown() -> None:
    data = facts(host_health={"edac_present": False, "edac": {}}, sources={"nvml": {"ok": False, "error": "boom"}})
    data["commands"]["kernel-events"] = {"stdout": "", "error": "dmesg: command not found"}
    s = read_sample(Facts("n1", data), t=0.0, stage="", attempt=0)
    assert (s.edac_ce, s.edac_ue, s.uptime_s, s.kernel) == (None, None, None, ())
    assert "nvml: boom" in s.missing and any(m.startswith("kernel-events") for m in s.missing)
    gone = read_sample(Facts.unreachable_node("n1", "ssh: no route"), t=0.0, stage="", attempt=0)
    assert not gone.ok and gone.error == "ssh: no route"
