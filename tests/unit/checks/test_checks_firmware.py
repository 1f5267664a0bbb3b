"""INV-02 GPU firmware: VBIOS and InfoROM alike on every GPU and, where the topology names them, as qualified.

The facts are a healthy simulated node read by the real collector (conftest.py); each row changes the
versions of some GPUs, or what NVML answered for them, and names the verdict and what its reason says.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from checks_support import (
    FAIL,
    INCOMPLETE,
    PASS,
    TOPOLOGY,
    assert_status,
    failing_subjects,
    gpu,
    judge,
    unmeasured_subjects,
)

from burnin.topology.model import GpuFirmware, Topology

Facts = dict[str, Any]
QUALIFIED_VBIOS = "96.00.74.00.01"  # the topology's (the real 8x H100 capture on driver 535.183.01)
OTHER_VBIOS = "96.00.74.00.0D"  # the real 8x H100 capture on driver 535.161.08
QUALIFIED_INFOROM = "G520.0200.00.05"


def consistency_only(topology: Topology = TOPOLOGY) -> Topology:
    """The shipped topology without expected firmware: INV-02 judges only that the GPUs agree."""
    return replace(topology, gpus=replace(topology.gpus, firmware=None))


def set_vbios(facts: Facts, indexes: range | list[int], value: str) -> None:
    for index in indexes:
        gpu(facts, index)["vbios"] = value


def test_the_shipped_topology_names_the_real_captures_versions() -> None:
    firmware = TOPOLOGY.gpus.firmware
    assert firmware is not None and firmware.source
    assert (firmware.vbios, firmware.inforom_image) == (QUALIFIED_VBIOS, QUALIFIED_INFOROM)


def test_healthy_node_passes_and_says_what_it_read(facts: Facts) -> None:
    assert gpu(facts, 0)["inforom"] == {"image": QUALIFIED_INFOROM, "oem": "2.1", "ecc": "7.16", "power": None}
    assert gpu(facts, 0)["errors"]["inforom_power"] == "NVML_ERROR_NOT_SUPPORTED"  # N/A on H100, as captured
    verdict = judge("INV-02", facts)
    assert_status(verdict, PASS, f"VBIOS {QUALIFIED_VBIOS}", f"InfoROM {QUALIFIED_INFOROM}", "on all 8 GPUs",
                  "power N/A", "as topology hgx-h100-8gpu names")


def test_without_expected_versions_consistency_only_is_said(facts: Facts) -> None:
    verdict = judge("INV-02", facts, consistency_only())
    assert_status(verdict, PASS, "names no expected versions: consistency only")
    named = GpuFirmware("golden node", vbios=QUALIFIED_VBIOS)
    partial = replace(TOPOLOGY, gpus=replace(TOPOLOGY.gpus, firmware=named))
    assert_status(judge("INV-02", facts, partial), PASS, "names no InfoROM: consistency only for it")


def test_one_gpu_on_another_vbios_fails_that_gpu(facts: Facts) -> None:
    set_vbios(facts, [3], OTHER_VBIOS)
    verdict = judge("INV-02", facts)
    assert_status(verdict, FAIL)
    assert verdict.reason == (f"INV-02 gpu3 VBIOS {OTHER_VBIOS} (expected VBIOS {QUALIFIED_VBIOS} as on gpu0-2,4-7 "
                              "and per topology hgx-h100-8gpu)")
    assert failing_subjects(verdict) == {"gpu3"}


def test_one_gpu_on_another_vbios_fails_without_expected_versions_too(facts: Facts) -> None:
    set_vbios(facts, [3], OTHER_VBIOS)
    verdict = judge("INV-02", facts, consistency_only())
    assert verdict.reason == (f"INV-02 gpu3 VBIOS {OTHER_VBIOS} (expected VBIOS {QUALIFIED_VBIOS} as on gpu0-2,4-7; "
                              "topology hgx-h100-8gpu names no VBIOS)")


def test_a_whole_node_on_an_unqualified_vbios_fails_as_one_group(facts: Facts) -> None:
    set_vbios(facts, range(8), OTHER_VBIOS)
    verdict = judge("INV-02", facts)
    assert verdict.reason == (f"INV-02 gpu0-7 VBIOS {OTHER_VBIOS} (expected VBIOS {QUALIFIED_VBIOS} "
                              "per topology hgx-h100-8gpu)")
    # alike among themselves: without expected versions the node passes
    assert_status(judge("INV-02", facts, consistency_only()), PASS, f"VBIOS {OTHER_VBIOS}")


def test_a_split_without_majority_names_every_group(facts: Facts) -> None:
    set_vbios(facts, range(4), OTHER_VBIOS)
    verdict = judge("INV-02", facts, consistency_only())
    assert_status(verdict, FAIL, f"gpu0-3 VBIOS {OTHER_VBIOS}", f"gpu4-7 VBIOS {QUALIFIED_VBIOS}",
                  "no version runs on most of them")
    # the topology settles who is wrong
    assert failing_subjects(judge("INV-02", facts)) == {"gpu0-3"}


def test_inforom_image_and_objects_are_judged(facts: Facts) -> None:
    gpu(facts, 5)["inforom"]["image"] = "G520.0200.00.04"
    gpu(facts, 6)["inforom"]["ecc"] = "7.15"
    verdict = judge("INV-02", facts)
    assert_status(verdict, FAIL, "gpu5 InfoROM G520.0200.00.04", "gpu6 InfoROM ECC object 7.15",
                  f"InfoROM {QUALIFIED_INFOROM} as on gpu0-4,6-7 and per topology",
                  "InfoROM ECC object 7.16 as on gpu0-5,7")
    assert failing_subjects(verdict) == {"gpu5", "gpu6"}


def test_a_gpu_off_on_two_fields_is_one_finding(facts: Facts) -> None:
    set_vbios(facts, [2], OTHER_VBIOS)
    gpu(facts, 2)["inforom"]["image"] = "G520.0200.00.04"
    verdict = judge("INV-02", facts)
    assert_status(verdict, FAIL, f"gpu2 VBIOS {OTHER_VBIOS}, InfoROM G520.0200.00.04")
    assert failing_subjects(verdict) == {"gpu2"}


def test_an_object_only_some_gpus_lack_is_a_mismatch(facts: Facts) -> None:
    target = gpu(facts, 1)
    target["inforom"]["oem"] = None
    target["errors"]["inforom_oem"] = "NVML_ERROR_NOT_SUPPORTED"
    assert_status(judge("INV-02", facts), FAIL, "gpu1 InfoROM OEM object N/A", "InfoROM OEM object 2.1 as on")


@pytest.mark.parametrize(("field", "error", "needle"), [
    (("vbios",), "NVML_ERROR_UNKNOWN", "gpu7: VBIOS version: NVML_ERROR_UNKNOWN"),
    (("vbios",), "NVML_ERROR_NOT_SUPPORTED", "gpu7: VBIOS version: NVML_ERROR_NOT_SUPPORTED"),
    (("inforom", "image"), "NVML_ERROR_CORRUPTED_INFOROM", "gpu7: InfoROM version: NVML_ERROR_CORRUPTED_INFOROM"),
    (("inforom", "ecc"), "NVML_ERROR_TIMEOUT", "gpu7: InfoROM ECC object version: NVML_ERROR_TIMEOUT"),
    (("inforom", "oem"), None, "gpu7: InfoROM OEM object version: not reported"),
])
def test_an_unreadable_version_is_incomplete(facts: Facts, field: tuple[str, ...], error: str | None,
                                             needle: str) -> None:
    target = gpu(facts, 7)
    holder = target
    for key in field[:-1]:
        holder = holder[key]
    holder[field[-1]] = None
    if error is not None:
        target["errors"]["_".join(field)] = error
    verdict = judge("INV-02", facts)
    assert_status(verdict, INCOMPLETE, needle)
    assert unmeasured_subjects(verdict) == {"gpu7"}


@pytest.mark.parametrize("value", ["", "   ", 96, ["96.00"], {"v": 1}])
def test_a_version_that_is_no_version_is_incomplete(facts: Facts, value: object) -> None:
    gpu(facts, 7)["vbios"] = value
    assert_status(judge("INV-02", facts), INCOMPLETE, "gpu7: VBIOS version", "is not a version")


def test_no_inforom_section_at_all_is_incomplete(facts: Facts) -> None:
    del gpu(facts, 0)["inforom"]  # a collector from before INV-02
    assert_status(judge("INV-02", facts), INCOMPLETE, "gpu0: InfoROM version: not reported")


def test_a_mismatch_is_named_even_when_another_gpu_is_unreadable(facts: Facts) -> None:
    set_vbios(facts, [3], OTHER_VBIOS)
    gpu(facts, 7)["vbios"] = None
    gpu(facts, 7)["errors"]["vbios"] = "NVML_ERROR_UNKNOWN"
    verdict = judge("INV-02", facts)
    assert_status(verdict, FAIL, f"gpu3 VBIOS {OTHER_VBIOS}", "not measured: gpu7 VBIOS version: NVML_ERROR_UNKNOWN")


def test_lost_and_unlisted_gpus_are_not_measured(facts: Facts) -> None:
    gpu(facts, 2)["lost"] = True
    gone = TOPOLOGY.gpus.devices[6].bus_id
    facts["nvml"]["gpus"] = [g for g in facts["nvml"]["gpus"] if g.get("bus_id") != gone]
    verdict = judge("INV-02", facts)
    assert_status(verdict, INCOMPLETE, "gpu2: NVML_ERROR_GPU_IS_LOST", f"gpu6: not listed by NVML ({gone})")


def test_no_gpus_is_not_a_pass(facts: Facts) -> None:
    facts["nvml"]["gpus"] = []
    assert judge("INV-02", facts).status is INCOMPLETE


def test_node_text_in_a_version_is_shown_escaped(facts: Facts) -> None:
    set_vbios(facts, [4], "96.00\x1b[31m.74")
    verdict = judge("INV-02", facts)
    assert_status(verdict, FAIL, "gpu4 VBIOS 96.00\\x1b[31m.74")
    assert "\x1b" not in verdict.reason


# ---------------------------------------------------------------- the golden manifest


def test_a_drafted_topology_names_the_golden_nodes_firmware(facts: Facts, tmp_path: Path) -> None:
    import yaml

    from burnin.facts import Facts as NodeFacts
    from burnin.golden import draft_topology
    from burnin.topology.load import load_topology

    doc = draft_topology(NodeFacts("gold01", facts), TOPOLOGY, "site-h100")
    firmware = doc["gpus"]["firmware"]
    assert (firmware["vbios"], firmware["inforom_image"]) == (QUALIFIED_VBIOS, QUALIFIED_INFOROM)
    assert "golden node gold01" in firmware["source"]
    path = tmp_path / "site-h100.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    drafted = load_topology(path)
    assert drafted.gpus.firmware == GpuFirmware(firmware["source"], QUALIFIED_VBIOS, QUALIFIED_INFOROM)
    assert judge("INV-02", facts, drafted).status is PASS


def test_a_node_with_mixed_firmware_cannot_be_golden(facts: Facts) -> None:
    from burnin.errors import UsageError
    from burnin.facts import Facts as NodeFacts
    from burnin.golden import draft_topology

    set_vbios(facts, [3], OTHER_VBIOS)
    with pytest.raises(UsageError, match=f"differ in VBIOS version .{QUALIFIED_VBIOS}, {OTHER_VBIOS}."):
        draft_topology(NodeFacts("gold01", facts), TOPOLOGY, "site-h100")


def test_a_golden_node_without_firmware_facts_drafts_none(facts: Facts) -> None:
    from burnin.facts import Facts as NodeFacts
    from burnin.golden import draft_topology

    for index in range(8):
        gpu(facts, index)["vbios"] = None
        del gpu(facts, index)["inforom"]
    assert draft_topology(NodeFacts("gold01", facts), TOPOLOGY, "site-h100")["gpus"]["firmware"] is None


# ---------------------------------------------------------------- topology validation


@pytest.mark.parametrize(("old", "new", "key", "message"), [
    ('    vbios: "96.00.74.00.01"\n', '    vbios: "96.00 74"\n', "gpus.firmware", "must be 1-31 letters"),
    ('    vbios: "96.00.74.00.01"\n', '    vbio: "96.00.74.00.01"\n', "gpus.firmware.vbio", "unknown key"),
    ('    vbios: "96.00.74.00.01"\n    inforom_image: "G520.0200.00.05"\n', "", "gpus.firmware",
     "firmware names no version"),
    ('    source: "nvidia-smi -q of an 8x H100', '    sourc: "nvidia-smi -q of an 8x H100', "gpus.firmware.sourc",
     "unknown key"),
])
def test_a_firmware_mistake_names_its_key_and_line(tmp_path: Path, old: str, new: str, key: str,
                                                   message: str) -> None:
    from burnin.errors import ConfigError
    from burnin.resources import topologies_dir
    from burnin.topology.load import load_topology

    text = (topologies_dir() / "hgx-h100-8gpu.yaml").read_text(encoding="utf-8")
    assert text.count(old) == 1
    path = tmp_path / "broken.yaml"
    path.write_text(text.replace(old, new), encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_topology(path)
    assert info.value.key == key, str(info.value)
    assert message in str(info.value)
    assert info.value.line is not None
    assert path.read_text().splitlines()[info.value.line - 1].strip().startswith(key.rsplit(".", 1)[-1] + ":")


def test_the_probes_cached_topology_keeps_the_firmware(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from burnin.resources import topologies_dir
    from burnin.topology.fast import load_cached

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    path = topologies_dir() / "hgx-h100-8gpu.yaml"
    first, second = load_cached(path), load_cached(path)  # validated, then built from the JSON cache
    assert list((tmp_path / "burnin" / "topology").glob("*.json"))
    assert first.gpus.firmware == second.gpus.firmware == TOPOLOGY.gpus.firmware
