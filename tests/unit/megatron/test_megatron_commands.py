"""The commands burnin builds: srun and torchrun forms, binding, containers, environment (argv only)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from burnin.launch.base import Hold
from burnin.launch.dryrun import DryRunLauncher
from burnin.launch.slurm import SlurmLauncher
from burnin.launch.ssh import TransportLauncher
from burnin.megatron.commands import (
    BIND_WRAPPER,
    RANK_WRAPPER,
    Launch,
    numa_of_local_rank,
    plan,
    probe_launch,
    probe_source,
    training_args,
    training_launch,
)
from burnin.megatron.config import ContainerSpec, MegatronSettings, load_megatron_settings
from burnin.topology.model import Topology
from burnin.transport.local import LocalTransport
from burnin.transport.slurm import SlurmClient
from burnin.transport.slurm_jobs import SlurmJobs

HCAS = "=" + ",".join(f"mlx5_{i}:1" for i in range(8))


def srun_argv(launch: Launch, job_id: str = "77") -> list[str]:
    """The srun step the Slurm launcher starts for an srun launch, in allocation ``job_id``."""
    assert launch.job is not None
    launcher = SlurmLauncher(SlurmJobs(SlurmClient(), job_id=job_id))
    launcher.describe_hold(launch.nodes, Hold("megatron", "the megatron phase", 600))
    return launcher.job_argv(launch.job)


def shown(launch: Launch, job_id: str | None = None) -> list[str]:
    """What a dry run prints for ``launch`` (through Slurm in allocation ``job_id``, else over a transport)."""
    said: list[str] = []
    inner = (SlurmLauncher(SlurmJobs(SlurmClient(), job_id=job_id)) if job_id is not None
             else TransportLauncher(LocalTransport(), name="ssh"))
    DryRunLauncher(inner, said.append, "dry").hold(launch.nodes, Hold("megatron", "the megatron phase", 600),
                                                    launch.plan())
    return [line for line in said if not line.startswith("# an exclusive")]


def _value(argv: list[str] | tuple[str, ...], flag: str) -> str:
    return argv[list(argv).index(flag) + 1]


def test_training_args_follow_the_recipe() -> None:
    settings = MegatronSettings()
    args = training_args(settings, settings.single_node, 8)
    for flag, value in [("--num-layers", "32"), ("--hidden-size", "4096"), ("--ffn-hidden-size", "14336"),
                        ("--num-attention-heads", "32"), ("--num-query-groups", "8"), ("--kv-channels", "128"),
                        ("--seq-length", "4096"), ("--tensor-model-parallel-size", "2"),
                        ("--pipeline-model-parallel-size", "1"), ("--global-batch-size", "64"),
                        ("--train-iters", "50"), ("--vocab-size", "128256"), ("--tokenizer-type", "NullTokenizer"),
                        ("--log-interval", "1"), ("--distributed-timeout-minutes", "7")]:
        assert _value(args, flag) == value, flag
    for flag in ("--mock-data", "--log-throughput", "--bf16", "--swiglu", "--group-query-attention",
                 "--sequence-parallel", "--use-distributed-optimizer"):
        assert flag in args
    for absent in ("--save", "--load", "--profile", "--train-samples"):
        assert absent not in args


def test_sequence_parallel_only_with_tensor_parallelism() -> None:
    settings = MegatronSettings.model_validate({"single_node": {"tensor": 1}})
    assert "--sequence-parallel" not in training_args(settings, settings.single_node, 8)


def test_extra_args_come_last() -> None:
    settings = MegatronSettings(extra_args=("--transformer-impl", "transformer_engine"))
    assert training_args(settings, settings.single_node, 8)[-2:] == ["--transformer-impl", "transformer_engine"]


def test_torchrun_single_node(h100_topology: Topology) -> None:
    launch = training_launch(MegatronSettings(), h100_topology, ["gpu01"], form="torchrun")
    assert launch.kind == "single" and launch.binding == "numactl" and launch.world_size == 8
    argv = launch.argv_by_node["gpu01"]
    assert argv[:7] == ("timeout", "-k", "10", "900", "env", f"NCCL_IB_HCA={HCAS}", "CUDA_DEVICE_MAX_CONNECTIONS=1")
    torchrun = argv.index("torchrun")
    assert argv[torchrun + 1:torchrun + 9] == ("--nproc_per_node=8", "--nnodes=1", "--node_rank=0",
                                               "--master_addr=gpu01", "--master_port=29500", "--tee=3",
                                               "--no-python", "sh")
    wrapper_end = argv.index(BIND_WRAPPER)
    assert argv[wrapper_end + 1:wrapper_end + 3] == ("python3", "pretrain_gpt.py")


def test_torchrun_multi_node_gives_each_node_its_rank(h100_topology: Topology) -> None:
    nodes = ["gpu01", "gpu02", "gpu03"]
    launch = training_launch(MegatronSettings(), h100_topology, nodes, form="torchrun")
    assert launch.kind == "multi" and launch.world_size == 24 and set(launch.argv_by_node) == set(nodes)
    for rank, node in enumerate(nodes):
        argv = launch.argv_by_node[node]
        assert f"--node_rank={rank}" in argv and "--nnodes=3" in argv and "--master_addr=gpu01" in argv
        assert _value(argv, "--tensor-model-parallel-size") == "8"
        assert _value(argv, "--global-batch-size") == "66"  # 64 rounded up to DP 3


def test_srun_form(h100_topology: Topology) -> None:
    launch = training_launch(MegatronSettings(), h100_topology, ["gpu01", "gpu02"], form="srun")
    assert list(launch.argv_by_node) == ["gpu01"] and launch.binding == "slurm" and launch.commands == ()
    argv = srun_argv(launch)
    for item in ("srun", "--jobid=77", "--nodes=2", "--nodelist=gpu[01-02]", "--ntasks=16", "--ntasks-per-node=8",
                 "--label", "--kill-on-bad-exit=1", "--cpu-bind=verbose,ldoms", "--distribution=block:block",
                 "--gpus-per-task=1", "--gpu-bind=closest", "--time=16", "--job-name=burnin-megatron"):
        assert item in argv, item
    sh = argv.index("sh")
    assert argv[sh + 1] == "-c" and argv[sh + 3] == RANK_WRAPPER
    assert argv[sh + 4:sh + 10] == ["timeout", "-k", "10", "900", "python3", "pretrain_gpt.py"]


@pytest.mark.proc
def test_srun_rank_wrapper_exports_what_torch_reads(h100_topology: Topology) -> None:
    launch = training_launch(MegatronSettings(), h100_topology, ["gpu01", "gpu02"], form="srun")
    argv = launch.argv_by_node["gpu01"]
    sh = argv.index("sh")
    env = {"SLURM_PROCID": "9", "SLURM_LOCALID": "1", "SLURM_NTASKS": "16", "PATH": os.environ["PATH"]}
    out = subprocess.run(["sh", "-c", argv[sh + 2], RANK_WRAPPER, "env"], env=env, capture_output=True,
                         text=True, check=True).stdout
    seen = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    assert {k: seen[k] for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "NCCL_IB_HCA",
                                 "CUDA_DEVICE_MAX_CONNECTIONS")} == {
        "RANK": "9", "LOCAL_RANK": "1", "WORLD_SIZE": "16", "MASTER_ADDR": "gpu01", "MASTER_PORT": "29500",
        "NCCL_IB_HCA": HCAS, "CUDA_DEVICE_MAX_CONNECTIONS": "1"}


@pytest.mark.proc
@pytest.mark.parametrize(("local_rank", "numa"), [(0, "0"), (3, "0"), (4, "1"), (7, "1")])
def test_numactl_wrapper_binds_each_local_rank_to_its_gpus_numa_node(h100_topology: Topology, local_rank: int,
                                                                      numa: str) -> None:
    settings = MegatronSettings(numactl="echo")  # print what numactl would get
    argv = training_launch(settings, h100_topology, ["gpu01"], form="torchrun").argv_by_node["gpu01"]
    sh = argv.index("sh")
    out = subprocess.run(["sh", "-c", argv[sh + 2], BIND_WRAPPER, "python3", "x.py"],
                         env={"LOCAL_RANK": str(local_rank), "PATH": os.environ["PATH"]},
                         capture_output=True, text=True, check=True).stdout
    assert out.split() == [f"--cpunodebind={numa}", f"--membind={numa}", "python3", "x.py"]


@pytest.mark.proc
def test_numactl_wrapper_refuses_a_rank_without_gpu(h100_topology: Topology) -> None:
    argv = training_launch(MegatronSettings(), h100_topology, ["gpu01"], form="torchrun").argv_by_node["gpu01"]
    sh = argv.index("sh")
    proc = subprocess.run(["sh", "-c", argv[sh + 2], BIND_WRAPPER, "true"], env={"LOCAL_RANK": "8"},
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 1 and "no GPU for local rank 8" in proc.stderr


def test_numa_of_local_rank(h100_topology: Topology) -> None:
    assert numa_of_local_rank(h100_topology) == [0, 0, 0, 0, 1, 1, 1, 1]


@pytest.mark.parametrize(("binding", "form", "cpu_bind", "wrapper"), [
    ("none", "srun", "--cpu-bind=verbose,none", False),
    ("numactl", "srun", "--cpu-bind=verbose,none", True),
    ("none", "torchrun", None, False),
])
def test_other_bindings(h100_topology: Topology, binding: str, form: str, cpu_bind: str | None,
                        wrapper: bool) -> None:
    settings = MegatronSettings.model_validate({"binding": binding})
    launch = training_launch(settings, h100_topology, ["gpu01"], form=form)  # type: ignore[arg-type]
    argv = srun_argv(launch) if form == "srun" else list(launch.argv_by_node["gpu01"])
    if cpu_bind:
        assert cpu_bind in argv and not any(a.startswith("--distribution") for a in argv)
    assert any("--cpunodebind" in a for a in argv) is wrapper


def test_pyxis_container_is_srun_options(h100_topology: Topology) -> None:
    settings = MegatronSettings(container=ContainerSpec(image="nvcr.io/nvidia/pytorch:24.07-py3",
                                                        mounts=("/opt/megatron-lm",), workdir="/opt/megatron-lm"))
    argv = srun_argv(training_launch(settings, h100_topology, ["gpu01"], form="srun"))
    assert "--container-image=nvcr.io/nvidia/pytorch:24.07-py3" in argv
    assert "--container-mounts=/opt/megatron-lm" in argv and "--container-workdir=/opt/megatron-lm" in argv
    assert argv.index("--container-image=nvcr.io/nvidia/pytorch:24.07-py3") < argv.index("sh")


@pytest.mark.parametrize(("runner", "head"), [
    ("docker", ("docker", "run", "--rm", "--gpus", "all", "--network", "host", "--ipc", "host")),
    ("apptainer", ("apptainer", "exec", "--nv")),
])
def test_docker_and_apptainer_wrap_torchrun(h100_topology: Topology, runner: str, head: tuple[str, ...]) -> None:
    settings = MegatronSettings.model_validate({"container": {"image": "img:1", "runner": runner,
                                                              "mounts": ["/data"]}})
    argv = training_launch(settings, h100_topology, ["gpu01"], form="torchrun").argv_by_node["gpu01"]
    assert argv[:len(head)] == head
    image = argv.index("img:1")
    assert argv[image + 1:image + 6] == ("timeout", "-k", "10", "900", "env") and "torchrun" in argv[image:]
    assert ("-v" in argv and "/data:/data" in argv) if runner == "docker" else ("--bind" in argv)


def test_site_env_and_hca_list(h100_topology: Topology) -> None:
    settings = MegatronSettings(nccl_ib_hca="=mlx5_0:1", env={"NCCL_DEBUG": "WARN", "CUDA_DEVICE_MAX_CONNECTIONS": "1"})
    argv = training_launch(settings, h100_topology, ["gpu01"], form="torchrun").argv_by_node["gpu01"]
    assert "NCCL_IB_HCA==mlx5_0:1" in argv and "NCCL_DEBUG=WARN" in argv


def test_probe_launch_uses_the_same_binding(h100_topology: Topology) -> None:
    launch = probe_launch(MegatronSettings(), h100_topology, "gpu01", form="torchrun")
    argv = launch.argv_by_node["gpu01"]
    assert launch.kind == "probe" and any("--cpunodebind" in a for a in argv)
    assert argv[-3:] == ("python3", "-c", probe_source())
    assert "BURNIN-PLACEMENT" in probe_source() and "<burnin placement probe>" in shown(launch)[1]
    srun = srun_argv(probe_launch(MegatronSettings(), h100_topology, "gpu01", form="srun"))
    assert "--cpu-bind=verbose,ldoms" in srun and "--ntasks-per-node=8" in srun


def test_plan_orders_probes_singles_then_groups(h100_topology: Topology) -> None:
    launches = plan(MegatronSettings(), h100_topology, ["a", "b", "c"], [["a", "b"], ["c"]], form="torchrun")
    assert [(x.kind, x.nodes) for x in launches] == [
        ("probe", ("a",)), ("probe", ("b",)), ("probe", ("c",)),
        ("single", ("a",)), ("single", ("b",)), ("single", ("c",)), ("multi", ("a", "b"))]
    off = MegatronSettings(multi_node_run=False)
    assert all(x.kind != "multi" for x in plan(off, h100_topology, ["a", "b"], form="srun"))


def test_a_dry_run_shows_each_nodes_command_as_a_shell_line(h100_topology: Topology) -> None:
    launch = training_launch(MegatronSettings(), h100_topology, ["gpu01", "gpu02"], form="torchrun")
    lines = shown(launch)
    assert [line.split()[0] for line in lines] == ["#", "[gpu01]", "[gpu02]"]
    assert lines[0] == "# multi-node run on gpu01,gpu02" and "'case \"$LOCAL_RANK\" in" in lines[1]


def test_the_documented_site_command_is_what_burnin_builds(h100_topology: Topology, tmp_path: Path) -> None:
    doc = (Path(__file__).resolve().parents[3] / "docs" / "megatron.md").read_text(encoding="utf-8")
    config = doc.split("A real site, Slurm with pyxis", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "megatron.yaml").write_text(config)
    settings = load_megatron_settings(tmp_path / "megatron.yaml")
    block = doc.split("with the site config above:\n\n```sh\n", 1)[1].split("```", 1)[0]
    documented = " ".join(part.strip() for part in block.replace("\\\n", " ").split())
    (built,) = shown(training_launch(settings, h100_topology, ["gpu001", "gpu002"], form="srun"), "4242")[1:]
    assert documented == built
