"""Building a run's parts: a run location that cannot hold a run is refused first, naming the key."""

from __future__ import annotations

import pytest

from rlpipe.config import ConfigError, load
from rlpipe.trainer.parts import check_run_location


def _cfg(data_dir, exp_name="run"):
    return load("params.yaml", [f"trainer.data_dir={data_dir}", f"trainer.exp_name={exp_name}"])


def test_a_data_dir_that_is_a_file_is_said_to_be_one(tmp_path):
    (tmp_path / "afile").write_text("x")
    with pytest.raises(ConfigError) as info:
        check_run_location(_cfg(tmp_path / "afile"))
    assert str(info.value) == (
        f"trainer.data_dir: {tmp_path / 'afile'} is a file, not a directory; "
        "choose a folder rlpipe can create and write"
    )
    assert "--resume" not in str(info.value)


def test_a_run_dir_that_is_a_file_names_exp_name(tmp_path):
    (tmp_path / "run").write_text("x")
    with pytest.raises(ConfigError, match=rf"^trainer.exp_name: {tmp_path / 'run'} is a file, not a "):
        check_run_location(_cfg(tmp_path))


def test_a_data_dir_where_no_folder_can_be_made_is_named():
    with pytest.raises(ConfigError) as info:
        check_run_location(_cfg("/proc"))
    assert str(info.value).startswith("trainer.data_dir: no folder can be created in /proc (")


def test_usable_locations_pass_and_leave_nothing(tmp_path):
    check_run_location(_cfg(tmp_path / "new" / "deeper"))
    check_run_location(_cfg(tmp_path))
    assert list(tmp_path.iterdir()) == []


def test_num_envs_beyond_memory_is_refused_before_the_env_is_built(tmp_path, monkeypatch):
    """A torch env allocates its N states in its constructor: the check comes first."""
    from rlpipe.trainer import Trainer, parts

    def no_env(*args, **kwargs):
        raise AssertionError("the env was built")

    monkeypatch.setattr(parts, "build_env", no_env)
    cfg = load(
        "params.yaml",
        [f"trainer.data_dir={tmp_path}", "trainer.num_envs=1000000000", "tracking.backend=none"],
    )
    refused = r"^trainer.num_envs: the run needs about .* lower trainer.num_envs"
    with pytest.raises(ConfigError, match=refused):
        Trainer(cfg).parts  # noqa: B018  # building the parts is the act under test
    assert list(tmp_path.iterdir()) == []
