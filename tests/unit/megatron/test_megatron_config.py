"""The site's Megatron config: defaults, the hardened loader, mistakes named by file, key and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from burnin.errors import ConfigError, UsageError
from burnin.megatron.config import CONFIG_ENV, PRODUCTION, SIMULATED, MegatronSettings, load_megatron_settings


def test_defaults_are_the_catalog_recipe() -> None:
    settings = MegatronSettings()
    shape = settings.model
    assert (shape.num_layers, shape.hidden_size, shape.ffn_hidden_size) == (32, 4096, 14336)
    assert (shape.num_attention_heads, shape.query_groups, shape.head_channels) == (32, 8, 128)
    assert shape.vocab_size == 128256
    assert settings.single_node.tensor == 2 and settings.multi_node.tensor == 8
    assert settings.train_iters == 50 and settings.env == {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}
    assert settings.launcher_for(slurm=True) == "srun" and settings.launcher_for(slurm=False) == "torchrun"
    assert settings.binding_for("srun") == "slurm" and settings.binding_for("torchrun") == "numactl"


def test_file_overrides_only_what_it_names(tmp_path: Path) -> None:
    path = tmp_path / "megatron.yaml"
    path.write_text("pretrain_script: /opt/megatron-lm/pretrain_gpt.py\n"
                    "container: {image: nvcr.io/nvidia/pytorch:24.07-py3, runner: pyxis, mounts: [/opt/megatron-lm]}\n"
                    "model: {num_layers: 16}\n"
                    "extra_args: [--transformer-impl, transformer_engine]\n")
    settings = load_megatron_settings(path)
    assert settings.pretrain_script == "/opt/megatron-lm/pretrain_gpt.py"
    assert settings.container is not None and settings.container.mounts == ("/opt/megatron-lm",)
    assert settings.model.num_layers == 16 and settings.model.hidden_size == 4096
    assert settings.extra_args == ("--transformer-impl", "transformer_engine")
    assert settings.python == "python3"  # production default kept


def test_simulated_defaults_and_a_file_on_top(tmp_path: Path) -> None:
    assert load_megatron_settings(simulated=True) == SIMULATED
    path = tmp_path / "m.yaml"
    path.write_text("timeout_s: 3\n")
    settings = load_megatron_settings(path, simulated=True)
    assert settings.timeout_s == 3 and settings.python is None and settings.probe == ("burnin-placement-probe",)
    assert load_megatron_settings() == PRODUCTION


def test_environment_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "env.yaml"
    path.write_text("train_iters: 20\n")
    monkeypatch.setenv(CONFIG_ENV, str(path))
    assert load_megatron_settings().train_iters == 20


@pytest.mark.parametrize(("text", "line", "key", "message"), [
    ("train_iters: 50\nmodel:\n  hidden_size: -1\n", 3, "model.hidden_size", "greater than or equal to 1"),
    ("single_node:\n  tensor: 2\n  tensr: 4\n", 3, "single_node.tensr", "unknown key"),
    ("train_iters: 8\n", 1, "(top level)", "leaves no iteration after warmup_iters"),
    ("model: {num_attention_heads: 32, num_query_groups: 5}\n", 1, "model", "not a multiple of num_query_groups"),
    ("launcher: torchrun\ncontainer: {image: x, runner: pyxis}\n", None, "(top level)", "pyxis container needs srun"),
    ("env: {'BAD-NAME': x}\n", 1, "env", "not an environment variable name"),
    ("timeout_s: .inf\n", 1, "timeout_s", "finite"),
    ("master_port: 80\n", 1, "master_port", "greater than or equal to 1024"),
])
def test_mistakes_name_file_key_and_line(tmp_path: Path, text: str, line: int | None, key: str,
                                         message: str) -> None:
    path = tmp_path / "site.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_megatron_settings(path)
    error = info.value
    assert error.path == str(path) and error.key == key and message in str(error)
    if line is not None:
        assert error.line == line


def test_a_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"megatron config .* not found"):
        load_megatron_settings(tmp_path / "nope.yaml")


def test_not_a_mapping(tmp_path: Path) -> None:
    path = tmp_path / "list.yaml"
    path.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="must be a YAML mapping"):
        load_megatron_settings(path)


def test_hostile_yaml_is_refused_by_the_hardened_loader(tmp_path: Path) -> None:
    path = tmp_path / "alias.yaml"
    path.write_text("a: &x [1, 2]\nextra_args: *x\n")
    with pytest.raises(ConfigError):
        load_megatron_settings(path)


@pytest.mark.parametrize(("world", "gbs", "expected"), [(8, 64, 64), (24, 64, 66), (40, 64, 65), (16, 64, 64)])
def test_multi_node_batch_rounds_up_to_the_data_parallel_size(world: int, gbs: int, expected: int) -> None:
    parallel = MegatronSettings().multi_node.model_copy(update={"global_batch_size": gbs})
    assert parallel.batch_for(world) == expected
    assert parallel.batch_for(world) % parallel.data_parallel(world) == 0


def test_a_world_the_model_split_does_not_divide() -> None:
    with pytest.raises(ValueError, match="not a multiple of TP 8"):
        MegatronSettings().multi_node.data_parallel(12)
