"""Edges of the ``ibv_devinfo`` parser that planted bugs slipped through (bench/mutants on
burnin/parsers/ibv_devinfo.py).

../shared holds no ibv_devinfo output (see test_parse_ibv_devinfo.py); these tests
take its sample, written from rdma-core's devinfo.c format strings, and pin the
identity fields no other test read: ``sys_image_guid`` and ``hw_ver`` (``0x0`` on a
ConnectX-7 is a value, not an absence), and an empty value read as none.
"""

from __future__ import annotations

from test_parse_ibv_devinfo import device

from burnin.parsers.ibv_devinfo import parse_ibv_devinfo


def test_every_identity_field_of_a_device_is_read() -> None:
    found = parse_ibv_devinfo(device("mlx5_0")).devices[0]
    assert (found.name, found.transport, found.fw_ver, found.node_guid, found.sys_image_guid, found.vendor_id,
            found.vendor_part_id, found.hw_ver, found.board_id, found.phys_port_cnt) == (
        "mlx5_0", "InfiniBand (0)", "28.41.1000", "b83f:d203:00a4:5a42", "b83f:d203:00a4:5a42", 0x02C9, 4129,
        "0x0", "MT_0000000838", 1)


def test_an_empty_identity_value_is_none() -> None:
    text = device("mlx5_0")
    for key in ("fw_ver", "node_guid", "sys_image_guid", "hw_ver", "board_id"):
        start = text.index(f"\t{key}:")
        end = text.index("\n", start)
        text = text[:start] + f"\t{key}:" + text[end:]
    found = parse_ibv_devinfo(text).devices[0]
    assert (found.fw_ver, found.node_guid, found.sys_image_guid, found.hw_ver, found.board_id) == (None,) * 5
    assert found.ports[0].active_mtu == 4096
