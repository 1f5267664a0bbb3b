"""Host tools' real outputs from other machines (tests/field): the values a careful reader takes from each."""

from __future__ import annotations

from field_samples import field_text

from burnin.parsers._common import expand_cpu_list
from burnin.parsers.cpu import parse_lscpu, parse_numactl_hardware
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
