"""Fabric commands and settings: NCCL environment from the topology, launch argv, site settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from burnin.errors import ConfigError, UsageError
from burnin.fabric import commands
from burnin.fabric.settings import PRODUCTION, SIMULATED, FabricSettings, load_settings, size_bytes
from burnin.launch.slurm import SlurmLauncher
from burnin.launch.ssh import TransportLauncher
from burnin.topology import Topology
from burnin.transport.local import LocalTransport
from burnin.transport.slurm import PER_NODE_TASK, SlurmClient
from burnin.transport.slurm_jobs import SlurmJobs

COMPUTE = [f"mlx5_{i}" for i in range(8)]


def test_ib_hca_is_the_exact_compute_list_never_storage(h100_topology: Topology) -> None:
    env = commands.nccl_env(h100_topology, PRODUCTION)
    value = env["NCCL_IB_HCA"]
    assert value.startswith("=")  # exact names: "mlx5_1" must not also match "mlx5_10"
    assert [item.split(":")[0] for item in value[1:].split(",")] == COMPUTE
    for storage in h100_topology.storage_hcas:
        assert storage.name not in value[1:].split(",") and f"{storage.name}:" not in value
    assert all(item.endswith(":1") for item in value[1:].split(","))


def test_socket_ifname_nvls_and_debug(h100_topology: Topology) -> None:
    env = commands.nccl_env(h100_topology, PRODUCTION)
    assert env["NCCL_SOCKET_IFNAME"] == "^docker,lo,enp41s0f0np0,enp177s0f0np0"  # the BlueField netdevs out
    assert env["NCCL_NVLS_ENABLE"] == "1" and env["NCCL_DEBUG"] == "WARN"
    off = commands.nccl_env(h100_topology, PRODUCTION.replace(nvls=False, socket_ifname="=bond0",
                                                              extra_env={"NCCL_IB_QPS_PER_CONNECTION": "2"}))
    assert off["NCCL_NVLS_ENABLE"] == "0" and off["NCCL_SOCKET_IFNAME"] == "=bond0"
    assert off["NCCL_IB_QPS_PER_CONNECTION"] == "2"


def test_single_rail_and_site_override(h100_topology: Topology) -> None:
    assert commands.nccl_env(h100_topology, PRODUCTION, ib_hca=commands.single_hca("mlx5_2"))["NCCL_IB_HCA"] \
        == "=mlx5_2:1"
    site = PRODUCTION.replace(ib_hca="=mlx5_0,mlx5_1")
    assert commands.nccl_env(h100_topology, site)["NCCL_IB_HCA"] == "=mlx5_0,mlx5_1"


def test_single_node_command_drives_every_gpu_with_env_and_timeout(h100_topology: Topology) -> None:
    argv = commands.single_node_command(h100_topology, PRODUCTION.replace(nccl_tests_dir="/opt/nccl-tests/build/"),
                                        "all_reduce")
    assert argv[0] == "env"
    tool = argv.index("/opt/nccl-tests/build/all_reduce_perf")
    assert argv[tool - 4:tool] == ["timeout", "-k", "5", "600"]
    args = argv[tool + 1:]
    assert args == ["-b", "8", "-e", "8G", "-f", "2", "-g", "8", "-n", "20", "-w", "5", "-c", "1"]
    assert any(a.startswith("NCCL_IB_HCA==mlx5_0:1,") for a in argv[:tool])


def _slurm(job_id: str | None = "42") -> SlurmLauncher:
    return SlurmLauncher(SlurmJobs(SlurmClient(), job_id=job_id))


def test_the_group_job_under_srun_follows_the_catalog_form(h100_topology: Topology) -> None:
    argv = _slurm().job_argv(commands.group_job(["gpu001", "gpu002"], h100_topology, PRODUCTION, "all_reduce"))
    assert argv[:2] == ["srun", "--jobid=42"]
    assert {"--nodes=2", "--nodelist=gpu[001-002]", "--ntasks=16", "--ntasks-per-node=8", "--mpi=pmix",
            "--gpus-per-node=8", "--overlap", "--time=11", "--kill-on-bad-exit=1"} <= set(argv)
    assert argv[argv.index("all_reduce_perf") + 1:][6:8] == ["-g", "1"]  # one GPU per rank
    assert argv[argv.index("all_reduce_perf") - 4:argv.index("all_reduce_perf")] == ["timeout", "-k", "5", "600"]
    sim = _slurm().job_argv(commands.group_job(["sim01", "sim02"], h100_topology, SIMULATED, "all_reduce"))
    assert "--mpi=pmi2" in sim and "--ntasks-per-node=1" in sim and not any(a.startswith("--gpus") for a in sim)
    container = PRODUCTION.replace(container="nvcr.io/nccl:1", srun_args=("--qos=burn",))
    argv = _slurm().job_argv(commands.group_job(["n1", "n2"], h100_topology, container, "all_reduce"))
    assert "--container-image=nvcr.io/nccl:1" in argv and argv.index("--qos=burn") < argv.index("env")


def test_per_node_steps_are_labelled_independent_processes() -> None:
    argv = _slurm("7").everywhere_argv(["a1", "a2", "a3"], ["nvbandwidth", "-i", "10"], timeout_s=60,
                                       srun=commands.srun_options(PRODUCTION))
    assert {"--ntasks=3", "--ntasks-per-node=1", "--mpi=none", "--label", "--kill-on-bad-exit=0",
            "--gpus-per-node=8"} <= set(argv)
    assert argv[argv.index("-c") + 1] == PER_NODE_TASK and argv[-3:] == ["nvbandwidth", "-i", "10"]


def test_mpirun_exports_the_nccl_environment(h100_topology: Topology) -> None:
    launcher = TransportLauncher(LocalTransport(), name="ssh")
    argv = launcher.job_argv(commands.group_job(["n1", "n2"], h100_topology, PRODUCTION, "all_gather",
                                                ib_hca="=mlx5_3:1"))
    assert argv[:4] == ["timeout", "-k", "5", "600"]
    assert argv[4:10] == ["mpirun", "-np", "16", "-N", "8", "--host"] and argv[10] == "n1:8,n2:8"
    assert argv[11:13] == ["--bind-to", "numa"]  # the site's mpirun arguments, before the variables
    assert "NCCL_IB_HCA==mlx5_3:1" in argv and argv[argv.index("NCCL_IB_HCA==mlx5_3:1") - 1] == "-x"
    assert "all_gather_perf" in argv


def test_nvbandwidth_command_lists_testcases() -> None:
    argv = commands.nvbandwidth_command(PRODUCTION)
    assert argv[4:7] == ["nvbandwidth", "-i", "10"]
    assert argv.count("-t") == 4 and "device_to_device_memcpy_read_ce" in argv


@pytest.mark.parametrize(("text", "value"), [("8", 8), ("64K", 65536), ("8M", 8 << 20), ("8G", 8 << 30)])
def test_sizes(text: str, value: int) -> None:
    assert size_bytes(text) == value


def test_settings_file_overlays_the_defaults(tmp_path: Path) -> None:
    file = tmp_path / "fabric.yaml"
    file.write_text("nccl_tests_dir: /opt/nccl-tests/build\nmax_bytes: 16G\ncollectives: [all_reduce, all_gather]\n")
    settings = load_settings(file)
    assert settings.nccl_tests_dir == "/opt/nccl-tests/build" and settings.max_bytes == "16G"
    assert settings.collectives == ("all_reduce", "all_gather") and settings.mpi == "pmix"
    simulated = load_settings(file, simulated=True, overrides={"localize": "always"})
    assert simulated.mpi == "pmi2" and simulated.gpus_per_rank == 8 and simulated.localize == "always"
    assert load_settings(None) == PRODUCTION


@pytest.mark.parametrize(("text", "message"), [
    ("nccl_test_dir: /x\n", "unknown key"),
    ("collectives: [all_reduce, broadcast_everything]\n", "collectives"),
    ("collectives: [all_gather]\n", "include all_reduce"),
    ("min_bytes: 8G\nmax_bytes: 1G\n", "above max_bytes"),
    ("max_bytes: lots\n", "size"),
])
def test_bad_settings_name_file_key_and_line(tmp_path: Path, text: str, message: str) -> None:
    file = tmp_path / "fabric.yaml"
    file.write_text("# site\n" + text)
    with pytest.raises(ConfigError) as exc:
        load_settings(file)
    assert str(file) in str(exc.value) and message in str(exc.value)


def test_missing_settings_file_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError):
        load_settings(tmp_path / "nope.yaml")


def test_settings_are_frozen() -> None:
    with pytest.raises(AttributeError):
        PRODUCTION.nvls = False  # type: ignore[misc]
    assert FabricSettings().gpus_per_node == 8


@pytest.mark.proc
def test_a_missing_mpirun_is_the_reason_and_the_tool_it_was_to_start_is_not_blamed(h100_topology: Topology) -> None:
    from burnin.fabric.measure import nccl_measurement

    settings = PRODUCTION.replace(mpirun="/nonexistent/bin/mpirun", timeout_s=30.0)
    run = TransportLauncher(LocalTransport(), name="ssh").job(
        commands.group_job(["n1", "n2"], h100_topology, settings, "all_reduce"))
    measured = nccl_measurement(run, "all_reduce", ("n1", "n2"), timeout_s=30.0, judge_min_bytes=1, nvls=False)
    assert not measured.ok and "mpirun not found: /nonexistent/bin/mpirun" in measured.reason
    assert "set nccl_tests_dir" not in measured.reason  # the tool was never started: not its fault
