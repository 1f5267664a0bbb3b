"""Host tools' real outputs from other machines (tests/field): the values a careful reader takes from each."""

from __future__ import annotations

import pytest
from field_samples import field_text

from burnin.errors import ParseError
from burnin.parsers._common import expand_cpu_list
from burnin.parsers.cpu import parse_lscpu, parse_numactl_hardware
from burnin.parsers.cpubind import parse_cpu_bind
from burnin.parsers.lspci import parse_lspci
from burnin.parsers.megatron import parse_megatron_log

# ------------------------------------------------------------------ lscpu, numactl


def test_lscpu_of_an_older_util_linux_under_a_bracketed_prompt() -> None:
    report = parse_lscpu(field_text("lscpu-2s-xeon-e5-2687w-v4-old-util-linux-cppfun.txt"))
    assert report.style == "classic"
    assert (report.model_name, report.vendor_id, report.architecture) == (
        "Intel(R) Xeon(R) CPU E5-2687W v4 @ 3.00GHz", "GenuineIntel", "x86_64")
    assert (report.cpus, report.sockets, report.cores_per_socket, report.threads_per_core) == (24, 2, 12, 1)
    assert report.numa_nodes == {0: "0-11", 1: "12-23"} and report.numa_node_count == 2
    assert all(not key.startswith("[") for key in report.fields)  # the prompt is no field


def test_numactl_pasted_as_markdown_headings() -> None:
    numa = parse_numactl_hardware(field_text("numactl-H-2s-56c-markdown-headings-alloc-hugepage.txt"))
    assert numa.available == 2
    node0, node1 = numa.nodes
    assert node0.cpus == expand_cpu_list("0-55,112-167") and node1.cpus == expand_cpu_list("56-111,168-223")
    assert (node0.size_mb, node0.free_mb, node1.size_mb, node1.free_mb) == (31862, 17469, 32172, 19017)
    assert numa.distances == {0: {0: 10, 1: 32}, 1: {0: 32, 1: 10}}


# ------------------------------------------------------------------ Megatron training log


def test_megatron_line_quoted_with_a_launcher_prefix() -> None:
    log = parse_megatron_log(field_text("megatron-flagscale-openseek-iter1-quoted-default0-prefix.txt"))
    (it,) = log.iterations
    assert (it.iteration, it.total, it.timestamp) == (1, 24000, "2025-05-27 15:23:07")
    assert (it.elapsed_ms, it.tflops_per_gpu, it.lm_loss, it.lr) == (271607.0, 40.4, 11.92634, 1.5e-06)
    assert (it.consumed_samples, it.global_batch_size, it.loss_scale, it.grad_norm) == (1024, 1024, 1.0, 5.96)
    assert (it.skipped, it.nan) == (0, 0) and log.truncated is False
    assert it.extra == {"load_balancing_loss": "1.041994E+00", "num zeros": "0.0", "params norm": "238.330"}


# ------------------------------------------------------------------ lspci


def test_lspci_stanza_with_ids_in_brackets_and_no_link_status() -> None:
    (gpu,) = parse_lspci(field_text("lspci-vvnn-a100-sxm4-stanza-cut-before-lnkcap-hwloc-issue653.txt")).devices
    assert (gpu.address, gpu.device_class, gpu.name, gpu.revision) == (
        "0000:da:00.0", "3D controller", "NVIDIA Corporation GA100 [A100 SXM4 40GB]", "a1")
    assert (gpu.vendor_id, gpu.device_id, gpu.numa_node, gpu.port_type) == ("10de", "20b0", 5, "Endpoint")
    assert (gpu.lnkcap_speed_gts, gpu.lnksta_speed_gts, gpu.lnksta_width) == (None, None, None)  # cut: unknown


def test_link_lines_without_their_device_line_are_refused() -> None:
    with pytest.raises(ParseError, match="device line found"):
        parse_lspci(field_text("lspci-vvv-4090-riser-lnksta-downgraded-no-device-line-jan-issue183.txt"))


# ------------------------------------------------------------------ srun --cpu-bind=verbose


def test_cpu_bind_line_commented_out_in_a_script_reads_its_wide_mask() -> None:
    report = parse_cpu_bind(field_text("cpu-bind-verbose-core-leonardo-mask-commented-parflow-bench.txt"))
    (task,) = report.tasks
    assert (task.node, task.task, task.local_task, task.pid, task.bind_type) == ("login08", 0, 0, 2499314, "MASK")
    assert task.mask == "8000000040000000800000004"
    assert task.cpus == (2, 35, 66, 99)  # what the Cpus_allowed_list line printed under it says
