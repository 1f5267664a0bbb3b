"""``ibv_devinfo`` and the single sysfs values IB-06 / IB-09 read (link speed, partition key).

No real ``ibv_devinfo`` output is in ../shared yet (reference-pending/SOURCES.md lists
what is); the samples below are written here from the format strings of rdma-core's
libibverbs/examples/devinfo.c (tabs as it prints them), and the simulator's rendering
is parsed back. Public captures of the format from H100 nodes (e.g. deepseek-ai/DeepEP
issue 397: 8x ConnectX-7, fw 28.41.1000, active_mtu 4096 (5)) are candidates for
reference-pending.
"""

from __future__ import annotations

import pytest

from burnin.errors import ParseError
from burnin.parsers import parse, to_jsonable
from burnin.parsers.ibv_devinfo import mtu_bytes, parse_ibv_devinfo
from burnin.parsers.sysfs_values import link_speed_gts, pkey, pkey_text


def device(name: str, *, state: str = "PORT_ACTIVE (4)", active_mtu: str = "4096 (5)", layer: str = "InfiniBand",
           fw: str = "28.41.1000", board: str = "MT_0000000838", lid: int = 12) -> str:
    return (
        f"hca_id:\t{name}\n"
        "\ttransport:\t\t\tInfiniBand (0)\n"
        f"\tfw_ver:\t\t\t\t{fw}\n"
        "\tnode_guid:\t\t\tb83f:d203:00a4:5a42\n"
        "\tsys_image_guid:\t\t\tb83f:d203:00a4:5a42\n"
        "\tvendor_id:\t\t\t0x02c9\n"
        "\tvendor_part_id:\t\t\t4129\n"
        "\thw_ver:\t\t\t\t0x0\n"
        f"\tboard_id:\t\t\t{board}\n"
        "\tphys_port_cnt:\t\t\t1\n"
        "\t\tport:\t1\n"
        f"\t\t\tstate:\t\t\t{state}\n"
        "\t\t\tmax_mtu:\t\t4096 (5)\n"
        f"\t\t\tactive_mtu:\t\t{active_mtu}\n"
        "\t\t\tsm_lid:\t\t\t1\n"
        f"\t\t\tport_lid:\t\t{lid}\n"
        "\t\t\tport_lmc:\t\t0x00\n"
        f"\t\t\tlink_layer:\t\t{layer}\n"
        "\n"
    )


def test_every_device_and_its_port() -> None:
    text = device("mlx5_0") + device("mlx5_1", active_mtu="2048 (4)", lid=13) + device(
        "mlx5_8", state="PORT_DOWN (1)", active_mtu="1024 (3)", layer="Ethernet", fw="32.39.2048",
        board="MT_0000000884", lid=0)
    report = parse_ibv_devinfo(text)
    assert [d.name for d in report.devices] == ["mlx5_0", "mlx5_1", "mlx5_8"] and report.errors == ()
    first = report.devices[0]
    assert (first.fw_ver, first.board_id, first.vendor_id, first.vendor_part_id, first.phys_port_cnt) == (
        "28.41.1000", "MT_0000000838", 0x02C9, 4129, 1)
    assert first.transport == "InfiniBand (0)" and first.node_guid == "b83f:d203:00a4:5a42"
    (p,) = first.ports
    assert (p.port, p.state, p.state_code, p.max_mtu, p.active_mtu, p.sm_lid, p.port_lid, p.port_lmc,
            p.link_layer) == (1, "PORT_ACTIVE", 4, 4096, 4096, 1, 12, 0, "InfiniBand")
    assert report.device("mlx5_1").ports[0].active_mtu == 2048  # type: ignore[union-attr]
    down = report.device("mlx5_8")
    assert down is not None and down.ports[0].state == "PORT_DOWN" and down.ports[0].active_mtu == 1024
    assert down.ports[0].link_layer == "Ethernet" and report.device("mlx5_9") is None


def test_verbose_output_keeps_the_same_fields() -> None:
    """``-v`` adds device capabilities (bare flag words, sub-sections) and per-port attributes and GIDs."""
    verbose = device("mlx5_0").replace(
        "\tphys_port_cnt:\t\t\t1\n",
        "\tphys_port_cnt:\t\t\t1\n"
        "\tmax_mr_size:\t\t\t0xffffffffffffffff\n"
        "\tdevice_cap_flags:\t\t0x25361c36\n"
        "\t\t\t\t\tBAD_PKEY_CNTR\n"
        "\t\t\t\t\tPORT_ACTIVE_EVENT\n"
        "\tmax_pkeys:\t\t\t128\n"
        "\tcompletion timestamp_mask:\t\t\t0x7fffffffffffffff\n"
        "\trss_caps:\n"
        "\t\tmax_rwq_indirection_tables:\t\t\t65536\n"
        "\traw packet caps:\n"
        "\t\t\t\t\tC-VLAN stripping offload\n",
    ).replace(
        "\t\t\tlink_layer:\t\tInfiniBand\n",
        "\t\t\tlink_layer:\t\tInfiniBand\n"
        "\t\t\tmax_msg_sz:\t\t0x40000000\n"
        "\t\t\tpkey_tbl_len:\t\t128\n"
        "\t\t\tactive_width:\t\t4X (2)\n"
        "\t\t\tphys_state:\t\tLINK_UP (5)\n"
        "\t\t\tGID[  0]:\t\tfe80:0000:0000:0000:b83f:d203:00a4:5a42\n",
    )
    report = parse_ibv_devinfo(verbose)
    assert report.errors == () and report.devices[0].ports[0].active_mtu == 4096
    assert report.devices[0].board_id == "MT_0000000838"


def test_a_quoted_copy_without_tabs_and_with_its_prompt() -> None:
    quoted = "$ ibv_devinfo -d mlx5_0\n" + "\n".join(
        "    " + line.strip() if line.strip() else "" for line in device("mlx5_0").splitlines()) + "\n```\n"
    report = parse_ibv_devinfo(quoted)
    assert report.devices[0].ports[0].active_mtu == 4096 and report.errors == ()


@pytest.mark.parametrize(("text", "expected"), [
    ("4096 (5)", 4096), ("2048 (4)", 2048), ("256 (1)", 256), ("1024 (3)", 1024),
    ("invalid MTU (7)", None), ("2048 (5)", None), ("4096", None), ("", None), (None, None), ("4096 (x)", None),
])
def test_mtu_bytes(text: str | None, expected: int | None) -> None:
    assert mtu_bytes(text) == expected


@pytest.mark.parametrize("text", ["No IB devices found\n", "2 HCAs found:\n\tmlx5_0\n\tmlx5_1\n\n", "  \n"])
def test_output_without_a_device_is_a_parse_error(text: str) -> None:
    with pytest.raises(ParseError):
        parse_ibv_devinfo(text)


def test_lines_before_the_first_device_are_kept_as_errors() -> None:
    report = parse_ibv_devinfo("Failed to query port 2 props\n" + device("mlx5_0"))
    assert report.errors == ("Failed to query port 2 props",) and len(report.devices) == 1


def test_registered_and_json(tmp_path: object) -> None:
    data = to_jsonable(parse("ibv-devinfo", device("mlx5_3")))
    assert data["devices"][0]["ports"][0]["active_mtu"] == 4096  # type: ignore[index]


def test_the_simulators_rendering_round_trips() -> None:
    from burnin.sim.faults import parse_fault_spec
    from burnin.sim.formats.ibv_devinfo import device_list, ibv_devinfo
    from burnin.sim.inject import apply_faults
    from burnin.sim.state import healthy_state
    from burnin.topology.load import find_topology

    topology = find_topology("hgx-h100-8gpu")
    state = healthy_state(topology, "sim01")
    apply_faults(state, [parse_fault_spec(f, topology) for f in ("ib-mtu-2048@mlx5_1", "ib-port-down@mlx5_5")])
    report = parse_ibv_devinfo(ibv_devinfo(state))
    assert {d.name for d in report.devices} == {h.name for h in state.hcas} and report.errors == ()
    for hca in state.hcas:
        parsed = report.device(hca.name)
        assert parsed is not None and parsed.fw_ver == hca.fw_ver and parsed.board_id == hca.board_id
        assert parsed.ports[0].active_mtu == hca.active_mtu and parsed.ports[0].link_layer == hca.link_layer
        assert parsed.ports[0].port_lid == hca.lid
    assert report.device("mlx5_1").ports[0].active_mtu == 2048  # type: ignore[union-attr]
    assert report.device("mlx5_5").ports[0].state == "PORT_DOWN"  # type: ignore[union-attr]
    assert device_list(state).startswith(f"{len(state.hcas)} HCAs found:\n\tmlx5_0\n")


# ------------------------------------------------------------ sysfs values


@pytest.mark.parametrize(("text", "expected"), [
    ("32.0 GT/s PCIe", 32.0), ("16.0 GT/s PCIe", 16.0), ("2.5 GT/s PCIe", 2.5), ("64.0 GT/s PCIe", 64.0),
    ("8 GT/s", 8.0), ("8.0 GT/s", 8.0), (" 32.0 GT/s PCIe\n", 32.0),
    ("Unknown", None), ("Unknown speed", None), ("", None), (None, None), ("32GT/s", 32.0), ("fast", None),
    ("32.0 Gb/s", None),
])
def test_link_speed(text: str | None, expected: float | None) -> None:
    assert link_speed_gts(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("0xffff", 0xFFFF), ("0x7fff", 0x7FFF), ("0x0000", 0), ("0x8001\n", 0x8001), ("0xFFFF", 0xFFFF),
    ("ffff", None), ("0x1ffff", None), ("", None), (None, None), ("0x", None),
])
def test_pkey(text: str | None, expected: int | None) -> None:
    assert pkey(text) == expected


def test_pkey_text() -> None:
    assert pkey_text(0xFFFF) == "0xffff" and pkey_text(0x8001) == "0x8001" and pkey_text(2) == "0x0002"
