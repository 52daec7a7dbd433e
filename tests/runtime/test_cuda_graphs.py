"""``trainer.cuda_graphs`` (rlpipe/runtime/cuda_graphs.py): the eager fallback said once, refusals."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from _offline_fixtures import tiny_cfg

import rlpipe.runtime.cuda_graphs as graphs
from rlpipe import config
from rlpipe.config import ConfigError
from rlpipe.trainer import Trainer

ROOT = Path(__file__).resolve().parents[2]
CPU, CUDA = torch.device("cpu"), torch.device("cuda", 0)


@pytest.fixture(autouse=True)
def _fresh_process_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(graphs, "_said", set())  # as in a new process: nothing said yet


@pytest.mark.parametrize("setting", ["on", "auto"])
def test_without_cuda_on_and_auto_run_eager_and_say_so_once(setting: str, capsys: pytest.CaptureFixture[str]):
    for _ in range(3):
        graphs.check_cuda_graphs(setting, CPU)
    err = capsys.readouterr().err
    assert err == f"cuda_graphs: {setting} needs a CUDA device; running eager on cpu\n"


def test_off_says_nothing_and_other_ranks_stay_silent(capsys: pytest.CaptureFixture[str]):
    graphs.check_cuda_graphs("off", CPU)
    graphs.check_cuda_graphs("on", CPU, announce=False)
    assert capsys.readouterr().err == ""
    assert graphs.cuda_graphs_fallback("off", CUDA) is None


def test_on_cuda_on_is_refused_and_auto_runs_eager_saying_why():
    # no CUDA is touched: the decision needs only the device's type
    with pytest.raises(
        ConfigError,
        match=r"^trainer\.cuda_graphs: on is not available: CUDA graph capture "
        r"is not built yet; accepted on cuda:0: auto \(eager\), off$",
    ):
        graphs.cuda_graphs_fallback("on", CUDA)
    assert graphs.cuda_graphs_fallback("auto", CUDA) == (
        "cuda_graphs: auto: no CUDA graph capture is built yet; running eager on cuda:0"
    )
    with pytest.raises(ConfigError, match="accepted: auto, on, off"):
        graphs.cuda_graphs_fallback("always", CPU)


@pytest.mark.parametrize(
    ("value", "expected"), [("on", "on"), ("off", "off"), ("auto", "auto"), ("true", "on")]
)
def test_the_config_key_reads_yamls_bare_on_and_off(value: str, expected: str):
    cfg = config.load(ROOT / "params.yaml", [f"trainer.cuda_graphs={value}"])
    assert cfg.trainer.cuda_graphs == expected
    assert config.load(ROOT / "params.yaml", []).trainer.cuda_graphs == "off"


def test_an_unknown_value_is_one_line_naming_the_key():
    with pytest.raises(ConfigError) as caught:
        config.load(ROOT / "params.yaml", ["trainer.cuda_graphs=maybe"])
    assert str(caught.value).endswith("trainer.cuda_graphs: got 'maybe'; accepted: auto, on, off")


def test_a_cpu_run_with_graphs_on_trains_eager_and_says_so_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    first = Trainer(tiny_cfg(tmp_path / "a", "trainer.cuda_graphs=on", "trainer.iterations=1"))
    first.train()
    second = Trainer(tiny_cfg(tmp_path / "b", "trainer.cuda_graphs=on", "trainer.iterations=1"))
    second.train()  # a second run in the same process: the line is not repeated
    err = capsys.readouterr().err
    assert err.count("cuda_graphs: on needs a CUDA device; running eager on cpu") == 1
    assert first.iteration == second.iteration == 1
