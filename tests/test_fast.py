"""rlpipe/fast.py: each fast path equals the library call it replaces; a default run is the same both ways."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import zarr
from _gradients import random_params
from zarr.codecs import Crc32cCodec
from zarr.storage import MemoryStore

from rlpipe import fast
from rlpipe.artifacts import zarr_io, zarr_read, zarr_write
from rlpipe.artifacts.intake import rollout_arrays
from rlpipe.artifacts.zarr_arrays import CHUNK_KEY_ENCODING
from rlpipe.artifacts.zarr_names import CHUNK_SEPARATOR
from rlpipe.rollout import DIM_NAMES, TRANSITION_KEYS, allocate_rollout

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(params=[True, False], ids=["fast", "library"])
def fast_paths(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """The switch, set both ways for the test (``RLPIPE_FAST`` unset and ``0``)."""
    monkeypatch.setattr(fast, "ENABLED", request.param)
    return request.param


# ------------------------------------------------------------------------------ categorical_draw


@pytest.mark.parametrize("shape", [(7, 3), (4, 6, 5), (1000, 2), (5,)])
def test_categorical_draw_is_multinomials_draw_bit_for_bit(fast_paths, shape):
    probs = torch.softmax(torch.randn(*shape), -1)
    torch.manual_seed(3)
    got = fast.categorical_draw(probs)
    after = torch.randint(0, 2**30, ()).item()
    torch.manual_seed(3)
    expected = torch.multinomial(probs.reshape(-1, shape[-1]), 1, True).reshape(shape[:-1])
    assert got.dtype == torch.int64 and got.shape == shape[:-1] and torch.equal(got, expected)
    assert torch.randint(0, 2**30, ()).item() == after  # the same use of the generator


def test_only_the_library_draw_checks_its_input(monkeypatch):
    negative = torch.tensor([[0.5, -0.1, 0.6]])
    monkeypatch.setattr(fast, "ENABLED", False)
    with pytest.raises(RuntimeError, match="probability tensor contains"):
        fast.categorical_draw(negative)
    monkeypatch.setattr(fast, "ENABLED", True)
    assert fast.categorical_draw(negative).shape == (1,)


# ------------------------------------------------------------------------------ clip_grad_norm


@pytest.mark.parametrize("scale", [0.001, 3.0])  # below and above max_norm
@pytest.mark.parametrize("dtypes", [(torch.float32,), (torch.float32, torch.float64)])
def test_clip_grad_norm_is_torchs_bit_for_bit(fast_paths, scale, dtypes):
    ours, theirs = random_params(scale, dtypes), random_params(scale, dtypes)
    norm = fast.clip_grad_norm(ours, 0.5)
    expected = torch.nn.utils.clip_grad_norm_(theirs, 0.5)
    assert torch.equal(norm, expected)
    assert all(torch.equal(a.grad, b.grad) for a, b in zip(ours, theirs, strict=True))
    total = math.sqrt(sum(float(p.grad.double().pow(2).sum()) for p in ours))
    assert total == pytest.approx(min(float(norm), 0.5), rel=1e-5)  # clipped to max_norm when above


# ------------------------------------------------------------------------------ write_zarr_store


def _rollout(n: int, obs: tuple[int, ...] | dict[str, tuple[int, ...]], action: tuple[int, ...]):
    """A schema-valid rollout of random values, with a nested key (a subgroup on disk)."""
    gen = torch.Generator().manual_seed(n)
    dtype = torch.float32 if action else torch.int64
    extras = {"action_mean": ((2,), torch.float32)}
    ro = allocate_rollout(n, 4, obs, action, dtype, "cpu", extras)
    for _, value in ro.items(include_nested=True, leaves_only=True):
        draw = torch.randint(0, 3 if value.is_floating_point() else 2, value.shape, generator=gen)
        value.copy_(draw * 0.5 if value.is_floating_point() else draw)
    for key in TRANSITION_KEYS:
        ro[key][:, -1] = 0
    ro["done"] = ro["terminated"] | ro["truncated"]
    ro.set(("extras", "action_mean"), ro.pop("action_mean"))
    return ro


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize(
    ("n", "chunk_envs", "obs", "action"),
    [
        (8, 1024, (4,), ()),  # one chunk per array
        (5, 2, (3,), (2,)),  # several env chunks, a padded edge chunk
        (3, 1024, {"state": (3,), "priv": (2,)}, ()),  # dict observations: group obs/
    ],
)
def test_direct_store_is_byte_identical_to_zarrs(tmp_path, n, chunk_envs, obs, action):
    rollout = _rollout(n, obs, action)
    arrays = {name: t.numpy() for name, t in rollout_arrays(rollout).items()}
    attrs = {"schema_version": 1, "iteration": 7, "env_id": "CartPole-v1", "nested": {"a": [1, 2.5, None]}}
    zarr_io.sync(zarr_write._write_group(tmp_path / "zarr", arrays, attrs, zarr_io._CHECKSUM, chunk_envs))
    fast.write_zarr_store(tmp_path / "direct", arrays, attrs, chunk_envs, DIM_NAMES, CHUNK_SEPARATOR)
    expected, written = _files(tmp_path / "zarr"), _files(tmp_path / "direct")
    assert len(expected) > 20 and sorted(written) == sorted(expected)
    assert [name for name in expected if written[name] != expected[name]] == []


def _zarrs_array_metadata(shape, dtype, chunks, dimension_names) -> bytes:
    """The library call: the ``zarr.json`` zarr's ``create_array`` writes for an uncompressed array."""
    files: dict = {}
    zarr.create_array(
        store=MemoryStore(files),
        shape=shape,
        dtype=dtype,
        chunks=chunks,
        compressors=(Crc32cCodec(),),
        filters=None,
        dimension_names=dimension_names,
        chunk_key_encoding=CHUNK_KEY_ENCODING,
        config={"write_empty_chunks": True},
        zarr_format=3,
    )
    return files["zarr.json"].to_bytes()


@pytest.mark.parametrize("dtype", sorted(fast.ZARR_DTYPES))
@pytest.mark.parametrize(
    ("shape", "chunks", "dims"),
    [
        ((8, 129), (8, 129), ("env", "time")),
        ((5, 3, 2, 7), (2, 3, 2, 7), ("env", "time", "feat0", "feat1")),
        ((0, 4), (1, 4), ("done", "feat0")),  # an empty sparse array
        ((3,), (3,), ("done",)),
    ],
)
def test_array_metadata_is_zarrs_byte_for_byte(dtype, shape, chunks, dims):
    expected = _zarrs_array_metadata(shape, dtype, chunks, dims)
    assert fast.zarr_array_metadata(shape, dtype, chunks, dims, CHUNK_SEPARATOR) == expected


def test_array_metadata_refuses_a_dtype_it_does_not_describe():
    with pytest.raises(ValueError, match="complex64"):
        fast.zarr_array_metadata((2,), "complex64", (2,), ("env",), CHUNK_SEPARATOR)


def test_write_rollout_without_codec_reads_back_and_detects_damage(tmp_path, fast_paths):
    rollout = _rollout(4, (4,), ())
    zarr_write.write_rollout(tmp_path / "iter-000001.zarr", rollout, {"iteration": 1})
    back, attrs = zarr_read.read_rollout(tmp_path / "iter-000001.zarr")
    assert attrs["iteration"] == 1 and attrs["schema_version"] == 1
    assert all(torch.equal(back.get(k), v) for k, v in rollout.items(include_nested=True, leaves_only=True))
    chunk = tmp_path / "iter-000001.zarr" / "reward" / "c.0.0"
    data = bytearray(chunk.read_bytes())
    data[3] ^= 0x40
    chunk.write_bytes(bytes(data))
    with pytest.raises(zarr_read.ChunkChecksumError, match="reward"):
        zarr_read.read_rollout(tmp_path / "iter-000001.zarr")


# ------------------------------------------------------------------------------ exit_process

_EXIT_SCRIPT = """
import atexit, sys, threading, time
atexit.register(lambda: print("torch" in sys.modules, file=sys.stderr))  # runs last
atexit.register(lambda: print("atexit ran", flush=True))
from rlpipe import fast
def late():
    time.sleep(0.2)
    print("thread joined")
threading.Thread(target=late).start()
print("buffered", end=" ")
fast.exit_process({code!r})
print("not reached")
"""


def _exit(code: object, switch: str) -> tuple[int, str, str, bool]:
    """``(returncode, stdout, stderr, torch imported)`` of a process ending in ``exit_process(code)``."""
    result = subprocess.run(
        [sys.executable, "-c", _EXIT_SCRIPT.format(code=code)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        env={**os.environ, "RLPIPE_FAST": switch},
    )
    *stderr, imported = result.stderr.splitlines()
    return result.returncode, result.stdout, "\n".join(stderr), imported == "True"


@pytest.mark.parametrize(
    ("code", "returncode", "stderr"),
    [(0, 0, ""), (3, 3, ""), (None, 0, ""), ("a one-line error", 1, "a one-line error")],
)
def test_exit_process_ends_the_process_as_sys_exit_does(code, returncode, stderr):
    fast_run, library_run = _exit(code, "1"), _exit(code, "0")
    assert fast_run == library_run
    assert fast_run == (returncode, "buffered thread joined\natexit ran\n", stderr, False)


# ------------------------------------------------------------------------------ imports

_DYNAMO_MARKS = """
import json, sys
import torch
import rlpipe.trainer
from rlpipe import fast
from rlpipe.algorithms.optim import build_optimizer
net = torch.nn.Linear(3, 2)
opt = build_optimizer("adam", net.parameters(), 1e-3)
net(torch.ones(4, 3)).sum().backward()
fast.optimizer_step(opt)
opt.zero_grad(set_to_none=True)
opt.load_state_dict(opt.state_dict())
before = "torch._dynamo" in sys.modules
import torch._dynamo
from torch._dynamo import trace_rules
import tensordict._lazy as lazy, tensordict._td as td, tensordict.utils as u
fns = [u._add_batch_dim_c, lazy._add_batch_dim, lazy._remove_batch_dim,
       td._add_batch_dim, td._remove_batch_dim]
raw = [m.__wrapped__ for m in (torch.optim.Optimizer.zero_grad, torch.optim.Optimizer.state_dict)]
print(json.dumps({"dynamo_before_compiling": before,
                  "allowed_in_graph": [id(f) in trace_rules._allowed_callable_ids for f in fns],
                  "marked_constant": getattr(u._lock_warn, "_dynamo_marked_constant", False),
                  "disables_are_dynamos": [vars(f).get("__dynamo_disable") is not f for f in raw]}))
"""


@pytest.mark.parametrize("fast_on", [True, False])
def test_dynamo_is_imported_only_to_compile_and_then_holds_what_the_library_gives_it(fast_on):
    """With the switch on, a trainer's imports and optimizer steps import no Dynamo; once Dynamo is
    imported, tensordict's functions are allowed in graph and marked constant, and the optimizer's
    ``_disable_dynamo`` methods use Dynamo's disable, exactly as with the library calls."""
    env = {**os.environ, "RLPIPE_FAST": "1" if fast_on else "0"}
    out = subprocess.run(
        [sys.executable, "-c", _DYNAMO_MARKS], capture_output=True, text=True, env=env, check=True
    ).stdout
    got = json.loads(out.splitlines()[-1])
    assert got["allowed_in_graph"] == [True] * 5 and got["marked_constant"] is True
    assert got["disables_are_dynamos"] == [True, True]
    assert got["dynamo_before_compiling"] is not fast_on


def _stepped(name: str, kwargs: dict, step) -> tuple[list[torch.Tensor], dict]:
    """Parameters and optimizer state after three steps of ``step(optimizer)`` on fixed gradients."""
    from rlpipe.algorithms.optim import build_optimizer

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 3))
    optimizer = build_optimizer(name, net.parameters(), 1e-2, kwargs)
    for i in range(3):
        net(torch.randn(11, 5, generator=torch.Generator().manual_seed(i))).pow(2).sum().backward()
        step(optimizer)
        optimizer.zero_grad(set_to_none=True)
    return [p.detach().clone() for p in net.parameters()], optimizer.state_dict()


@pytest.mark.parametrize(
    ("name", "kwargs"),
    [
        ("adam", {}),
        ("adam", {"foreach": True}),
        ("adamw", {"amsgrad": True}),
        ("sgd", {"momentum": 0.9}),
        ("rmsprop", {}),
    ],
)
def test_optimizer_step_is_the_library_step_bit_for_bit(name, kwargs, monkeypatch):
    monkeypatch.setattr(fast, "ENABLED", True)
    library = _stepped(name, kwargs, lambda optimizer: optimizer.step())
    fast_path = _stepped(name, kwargs, fast.optimizer_step)
    assert all(torch.equal(a, b) for a, b in zip(library[0], fast_path[0]))
    assert library[1]["param_groups"] == fast_path[1]["param_groups"]
    for key, state in library[1]["state"].items():
        other = fast_path[1]["state"][key]
        assert state.keys() == other.keys() and all(torch.equal(v, other[k]) for k, v in state.items())


def test_optimizer_step_leaves_a_hooked_optimizer_to_the_library(monkeypatch):
    monkeypatch.setattr(fast, "ENABLED", True)
    from rlpipe.algorithms.optim import build_optimizer

    net = torch.nn.Linear(2, 1)
    optimizer = build_optimizer("adam", net.parameters(), 1e-2)
    calls = []
    optimizer.register_step_post_hook(lambda *args: calls.append(args))
    net(torch.ones(1, 2)).sum().backward()
    fast.optimizer_step(optimizer)
    assert len(calls) == 1
