"""``trainer.compile`` (rlpipe/runtime/compile.py): fullgraph steps, the setting, compiled runs that replay.

The graph-break checks trace with ``torch._dynamo.explain`` (Dynamo's capture only, no inductor
kernels), so every variant is checked in the default suite in seconds; one tiny run compiles with
inductor for real, its kernels cached in the test's own ``TORCHINDUCTOR_CACHE_DIR``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest
import torch
from _offline_fixtures import assert_same_learner, tiny_cfg
from click.testing import CliRunner

from rlpipe.algorithms import BaseAlgorithm
from rlpipe.algorithms.minibatches import take_rows
from rlpipe.artifacts.checkpoints import load_checkpoint
from rlpipe.artifacts.zarr_read import read_rollout
from rlpipe.build import build_algorithm
from rlpipe.cli import cli
from rlpipe.config import ConfigError
from rlpipe.policies.recurrent import RecurrentCore
from rlpipe.rollout import allocate_rollout
from rlpipe.runtime.compile import (
    allow_recurrent_weights,
    compile_decision,
    compile_words,
    inductor_cache_dir,
)
from rlpipe.trainer import Trainer

N, T = 8, 16
OBS = gym.spaces.Box(-1, 1, (3,))
DISCRETE, BOX2, BOX1 = gym.spaces.Discrete(2), gym.spaces.Box(-1, 1, (2,)), gym.spaces.Box(-1, 1, (1,))
GRPO = ("algorithm.name=grpo", "policy.name=actor_only")
RECURRENT = ("policy.name=recurrent_actor_critic",)
SYMMETRY = (
    "algorithm.cfg.symmetry={function: 'rlpipe.envs.tasks.symmetry:pendulum_mirror', "
    "data_augmentation: true, mirror_loss: true}"
)
VARIANTS = {
    "ppo-mlp-discrete": ((), DISCRETE),
    "ppo-mlp-gaussian-obs-normalization": (("policy.obs_normalization=true",), BOX2),
    "ppo-mlp-beta": (("policy.distribution=beta",), BOX2),
    "ppo-symmetry": ((SYMMETRY,), BOX1),
    "ppo-rnd": (("algorithm.cfg.rnd={hidden_sizes: [16]}",), DISCRETE),
    "ppo-rnd-intrinsic-critic": (("algorithm.cfg.rnd={hidden_sizes: [16], intrinsic_critic: true}",), BOX2),
    "ppo-lstm-obs-normalization": ((*RECURRENT, "policy.obs_normalization=true"), DISCRETE),
    "ppo-gru-2-layers": ((*RECURRENT, "policy.recurrent={type: gru, num_layers: 2}"), BOX2),
    "grpo": ((*GRPO, "algorithm.cfg={batch_size: 32}"), DISCRETE),
    "grpo-reference-kl-obs-normalization": (
        (*GRPO, "algorithm.cfg={batch_size: 32, kl_coef: 0.1}", "policy.obs_normalization=true"),
        BOX2,
    ),
}


def build(tmp_path: Path, extra: tuple[str, ...], space: gym.Space) -> BaseAlgorithm:
    torch.manual_seed(0)
    return build_algorithm(tiny_cfg(tmp_path, *extra), OBS, space, torch.device("cpu"))


def rollout(algo: BaseAlgorithm, space: gym.Space):
    """A random ``[N, T+1]`` rollout of the collector's schema, a few episode ends in it."""
    gen = torch.Generator().manual_seed(0)
    state = (
        {"recurrent_state": ((algo.policy.state_size,), torch.float32)} if algo.policy.is_recurrent else {}
    )
    dtype = torch.float32 if isinstance(space, gym.spaces.Box) else torch.int64
    ro = allocate_rollout(N, T, (3,), space.shape or (), dtype, "cpu", state)
    ro["obs"].copy_(torch.randn(ro["obs"].shape, generator=gen))
    if dtype == torch.int64:
        ro["action"][:, :-1] = torch.randint(0, 2, (N, T), generator=gen)
    else:
        ro["action"].copy_(torch.rand(ro["action"].shape, generator=gen) * 1.8 - 0.9)
    ro["sample_log_prob"][:, :-1] = -0.7 + 0.05 * torch.randn(N, T, generator=gen)
    ro["reward"][:, :-1] = torch.randn(N, T, generator=gen) + 1.0
    done = torch.rand(N, T, generator=gen) < 0.1
    ro["done"][:, :-1], ro["terminated"][:, :-1] = done, done
    return ro


def assert_one_graph(fn, *args) -> None:
    """``fn(*args)`` traces into exactly one graph: no graph break (what ``fullgraph=True`` demands).

    Nor any of torch's fused recurrent ops, which inductor cannot compile on the CPU.
    """
    explained = torch._dynamo.explain(fn)(*args)
    reasons = [str(b.reason).splitlines()[0] for b in explained.break_reasons]
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), reasons
    code = explained.graphs[0].code
    assert "lstm" not in code and "gru" not in code


@pytest.mark.parametrize("variant", VARIANTS)
def test_act_step_and_minibatch_loss_trace_into_one_graph_each(variant: str, tmp_path: Path):
    extra, space = VARIANTS[variant]
    algo = build(tmp_path, extra, space)
    policy, obs = algo.policy, torch.randn(N, 3)
    torch._dynamo.reset()
    allow_recurrent_weights()  # as compile_step does
    with torch.inference_mode():  # as the collector acts
        if policy.is_recurrent:
            assert_one_graph(policy.sample_step, obs, torch.zeros(N, policy.state_size), False)
        else:
            assert_one_graph(policy.sample, obs, False)
    ro = rollout(algo, space)
    rnd = getattr(algo, "rnd", None)
    if rnd is not None:
        rnd.build(3, 0)
    algo.compute_advantages(ro)
    batch = algo.update_batch(ro)
    columns = dict(algo.prepare(take_rows(dict(batch.items()), torch.arange(8))).items())
    assert_one_graph(algo.minibatch_loss, columns)
    if rnd is not None:
        returns = columns.get("intrinsic_return")
        assert_one_graph(rnd.losses, columns["obs"], returns)


@pytest.mark.parametrize(("kind", "layers"), [("lstm", 1), ("lstm", 2), ("gru", 2)])
def test_the_written_out_cell_equations_equal_torchs_recurrent_kernel(kind: str, layers: int):
    torch.manual_seed(0)
    core = RecurrentCore(kind, 5, 8, layers)
    x, state = torch.randn(6, 5), torch.randn(6, core.state_size)
    out, next_state = core(x, state)
    cell_out, cell_state = core.cell_step(x, state)
    assert torch.allclose(out, cell_out, atol=1e-6) and torch.allclose(next_state, cell_state, atol=1e-6)


def test_the_setting_decides_on_off_and_auto(tmp_path: Path):
    cpu = torch.device("cpu")
    assert compile_decision("on", cpu) and not compile_decision("off", cpu)
    assert not compile_decision("auto", cpu)  # measured not to pay on the CPU
    assert compile_words("off", cpu) is None
    assert compile_words("auto", cpu) == (
        "compile auto → off (eager on cpu: compiling was not measured to pay there)"
    )
    with pytest.raises(ValueError, match=r"^trainer\.compile: got 'sometimes'; accepted: auto, on, off$"):
        compile_decision("sometimes", cpu)
    assert tiny_cfg(tmp_path).trainer.compile == "off"
    with pytest.raises(ConfigError, match=r"trainer\.compile"):
        tiny_cfg(tmp_path, "trainer.compile=sometimes")


def test_the_inductor_cache_is_the_users_rlpipe_cache_unless_set(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", "/somewhere")
    assert inductor_cache_dir() == Path("/somewhere/rlpipe/inductor")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/elsewhere")
    assert inductor_cache_dir() == Path("/elsewhere")


COMPILED = ("trainer.iterations=2", "checkpoint.every_iteration=true")


def test_compiled_runs_are_bit_identical_resume_and_replay_exactly_and_stay_close_to_eager(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    runs = {}
    for name, setting in (("a", "on"), ("b", "on"), ("eager", "off")):
        runs[name] = tiny_cfg(tmp_path / name, *COMPILED, f"trainer.compile={setting}").run_dir
        Trainer(tiny_cfg(tmp_path / name, *COMPILED, f"trainer.compile={setting}")).train()
    out = capsys.readouterr()
    assert "compile on: act step + minibatch loss (inductor, fullgraph; cache" in out.out
    assert "compile: act step ready in" in out.err and "compile: minibatch loss ready in" in out.err
    result = CliRunner().invoke(cli, ["replay", str(runs["a"]), "--out", str(tmp_path / "re")])
    assert result.exit_code == 0, result.output
    Trainer(tiny_cfg(tmp_path / "split", *COMPILED, "trainer.compile=on", "trainer.iterations=1")).train()
    split = tiny_cfg(tmp_path / "split", *COMPILED, "trainer.compile=on")
    Trainer(split, resume=True).train()
    for k in (1, 2):
        ckpt = f"checkpoints/ckpt-{k:06d}.pt"
        assert_same_learner(runs["a"] / ckpt, runs["b"] / ckpt)
        assert_same_learner(runs["a"] / ckpt, tmp_path / "re" / ckpt)
        assert_same_learner(runs["a"] / ckpt, Path(str(split.run_dir)) / ckpt)
    # Eager: the same random draws (the first rollout's actions), float results within rounding.
    compiled, _ = read_rollout(runs["a"] / "rollouts" / "iter-000001.zarr")
    eager, _ = read_rollout(runs["eager"] / "rollouts" / "iter-000001.zarr")
    assert torch.equal(compiled["action"], eager["action"])
    assert torch.allclose(compiled["sample_log_prob"], eager["sample_log_prob"], atol=1e-6)
    weights = [
        load_checkpoint(runs[name] / "checkpoints/ckpt-000001.pt")["policy"] for name in ("a", "eager")
    ]
    assert all(torch.allclose(weights[0][k], weights[1][k], atol=1e-5) for k in weights[0])


_EAGER_RUN = """
import sys
sys.path.insert(0, "tests")
from _offline_fixtures import tiny_cfg
from rlpipe.trainer import Trainer
cfg = tiny_cfg(sys.argv[1], "trainer.iterations=1", "store.enabled=false", "trainer.compile=" + sys.argv[2])
Trainer(cfg).train()
print("dynamo, inductor imported:", "torch._dynamo" in sys.modules, "torch._inductor" in sys.modules)
"""


@pytest.mark.parametrize("setting", ["off", "auto"])
def test_a_run_that_compiles_nothing_never_imports_dynamo_or_inductor(setting: str, tmp_path: Path):
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run(
        [sys.executable, "-c", _EAGER_RUN, str(tmp_path), setting],
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
        check=True,
    )
    assert done.stdout.splitlines()[-1] == "dynamo, inductor imported: False False"
    assert ("compile auto → off" in done.stdout) is (setting == "auto")
