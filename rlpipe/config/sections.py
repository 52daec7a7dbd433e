"""The config classes: one typed class per ``params.yaml`` section, a docstring per field."""

from __future__ import annotations

from typing import Any, Literal, Self

from pydantic import Field, ValidationError, field_validator, model_validator

from rlpipe.config.algorithm_block import AlgorithmBlock, UnresolvedCfg, merged_replay_block
from rlpipe.config.errors import ConfigError, field_model, located_error, unknown_key
from rlpipe.config.identity import Seed, exp_name_problem
from rlpipe.config.offpolicy import OffPolicyCfg, replay_rollouts
from rlpipe.config.policy import (
    ACTIVATIONS,
    NETWORK_TYPES,
    CNNCfg,
    MLPCfg,
    NetworkBlock,
    PolicyCfg,
    RecurrentCfg,
)
from rlpipe.config.storage import PrecisionName, StoreBudgetCfg, precision_group_problem
from rlpipe.config.strict import StrictModel
from rlpipe.location import AnyPath, location, url_problem

__all__ = [
    "ACTIVATIONS",
    "CNNCfg",
    "CheckpointCfg",
    "ConfigError",
    "EnvCfg",
    "EvalCfg",
    "EventCfg",
    "EventsCfg",
    "MLPCfg",
    "NETWORK_TYPES",
    "NetworkBlock",
    "PolicyCfg",
    "RecurrentCfg",
    "ReplayCfg",
    "merged_replay_policy",
    "RunConfig",
    "StopConditionCfg",
    "StoreCfg",
    "TrackingCfg",
    "TrainerCfg",
]


class StopConditionCfg(StrictModel):
    """One entry of ``trainer.stop_when``: a bound (``min``/``max``) or a patience rule on one metric."""

    metric: str
    """Metric name as logged, e.g. ``eval/return_mean``; iterations without it are skipped."""
    min: float | None = None
    """Stop once the metric is at least this (e.g. ``{metric: eval/return_mean, min: 475}``)."""
    max: float | None = None
    """Stop once the metric is at most this."""
    patience: int | None = Field(default=None, ge=1)
    """Stop after this many consecutive reports of the metric without improvement."""
    min_delta: float = Field(default=0.0, ge=0)
    """Improvement needed to reset the patience counter."""
    mode: Literal["max", "min"] = "max"
    """Whether larger (``max``) or smaller (``min``) values are improvements (patience rules)."""

    @model_validator(mode="after")
    def _one_rule(self) -> StopConditionCfg:
        bound = self.min is not None or self.max is not None
        if bound == (self.patience is not None):
            raise ValueError("give a bound (min and/or max) or patience, not both or neither")
        return self


class EventCfg(StrictModel):
    """One user function called during training or evaluation (the JSON train-config ``events`` form)."""

    func: str
    """``package.module:function``, or the name of a built-in event function (see ``rlpipe events``)."""
    mode: Literal["interval", "startup"] = "interval"
    """``interval``: every ``interval_step`` iterations (train) or eval steps (eval); ``startup``: once."""
    interval_step: int = Field(default=1, ge=1)
    """How many iterations (train) or eval env steps (eval) between two calls."""
    params: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments passed to the function after the event context."""


class EventsCfg(StrictModel):
    """Event functions of the training loop (``train``: after each update) and of evaluation (``eval``)."""

    train: dict[str, EventCfg] = Field(default_factory=dict)
    """Called with the iteration's context after its update (``interval``) or at run start (``startup``)."""
    eval: dict[str, EventCfg] = Field(default_factory=dict)
    """Called at evaluation env steps (``interval``) or before each evaluation (``startup``)."""


class TrainerCfg(StrictModel):
    """Run-level settings: seed, device, sizes and how often to evaluate and save."""

    exp_name: str = "cartpole_ppo"
    """Experiment name: outputs go to ``<data_dir>/<exp_name>/``; a plain folder name (letters,
    digits, ``._-+=@``) of at most 200 characters, never a path."""
    seed: Seed = 42
    """Seed for python, numpy, torch and every env reset: 0 to 2**31 - 1."""
    device: str = "auto"
    """``auto`` (CUDA when present), ``cpu``, ``cuda`` or ``cuda:N``."""
    num_envs: int = Field(default=256, ge=1)
    """Parallel training envs N (per rank when distributed)."""
    buffer_size: int = Field(default=32, ge=1)
    """Steps per env per rollout, T."""
    iterations: int = Field(default=60, ge=1)
    """Collect → advantage → update iterations."""
    enable_eval: bool = True
    """Run deterministic evaluation on separate envs."""
    eval_freq: int = Field(default=50_000, ge=1)
    """Evaluate whenever the env-step counter crosses a multiple of this (and at the end)."""
    num_eval_envs: int = Field(default=16, ge=1)
    """Envs used by evaluation."""
    num_eval_episodes: int = Field(default=1, ge=1)
    """Finished episodes per eval env."""
    save_freq: int = Field(default=100_000, ge=1)
    """Checkpoint whenever the env-step counter crosses a multiple of this; a final one is always written."""
    num_threads: int | Literal["auto"] | None = "auto"
    """Torch's CPU threads: ``auto`` (1 unless the networks' largest forward is large enough for
    threads to pay, see ``rlpipe/runtime/threads.py``), a positive int, or ``null`` (torch's default: one
    per core, which collapses on a busy machine)."""
    data_dir: str = "data"
    """Root of every output (rollouts, checkpoints, metrics): a folder, or an fsspec URL such as
    ``s3://bucket/prefix`` (endpoint and credentials from ``AWS_ENDPOINT_URL`` and its kin)."""
    distributed: bool = False
    """Use torch.distributed (launch with torchrun)."""
    horizons_per_env_reset: int = -1
    """Reset every training env before every k-th rollout: 1 before each, negative never
    (the last observation carries over; GRPO's ``reset_every_rollout`` still resets every time)."""
    deterministic_collect: bool = False
    """Collect with the policy's mode action instead of sampling (evaluation-style data)."""
    stop_when: list[StopConditionCfg] = Field(default_factory=list)
    """Stop early when any condition holds after an iteration (final checkpoint and eval as at the
    end; ``stopped_by`` in metrics.json)."""
    # Keys of the documents' JSON train-config format, kept so that the params.yaml of earlier runs
    # still load; a params file's values are translated (or warned about) by config/documents.py.
    gym_config: str | None = None
    """Documents' JSON only: path of the env JSON, read into the ``env`` block."""
    headless: bool = True
    """Documents' compatibility; no effect (rlpipe never opens a viewer)."""
    enable_rt: bool = False
    """Documents' compatibility; no effect."""
    gpu_id: int = 0
    """Documents' compatibility; no effect (use ``device: cuda:N``)."""
    use_wandb: bool = False
    """Documents' compatibility; no effect (rlpipe tracks with MLflow: ``tracking``)."""
    wandb_project_name: str | None = None
    """Documents' compatibility; no effect."""
    events: EventsCfg = Field(default_factory=lambda: EventsCfg())
    """User functions run at stage boundaries: ``{train: {name: event}, eval: {name: event}}``."""
    on_nonfinite: Literal["stop", "skip"] = "stop"
    """A NaN/Inf in a rollout, advantage, loss, gradient or the weights: ``stop`` the run (exit 3),
    or ``skip`` the iteration (its rollout goes to ``rollouts/rejected/``, the weights stay)."""
    max_skipped_in_a_row: int = Field(default=3, ge=1)
    """With ``on_nonfinite: skip``: stop (exit 3) after this many skipped iterations in a row."""
    cuda_graphs: Literal["auto", "on", "off"] = "off"
    """Replay captured CUDA graphs: ``off``, ``auto`` or ``on``. Capture is not built yet, so every run is
    eager: without CUDA, ``auto`` and ``on`` say so once and run eager; on CUDA, ``auto`` runs eager
    and ``on`` is refused (``rlpipe/runtime/cuda_graphs.py``). YAML's bare ``on``/``off`` are read as such."""

    compile: Literal["auto", "on", "off"] = "off"
    """Compile the policy's act step and the update's minibatch loss with ``torch.compile``
    (inductor, fullgraph): ``off``, ``on``, or ``auto`` (compiled where it was measured to pay, compile
    time included: nowhere yet, so eager; ``rlpipe/runtime/compile.py``). Results equal eager's up to
    float rounding; two compiled runs are bit-identical. YAML's bare ``on``/``off`` are read as such."""

    @field_validator("device")
    @classmethod
    def _device_string(cls, value: str) -> str:
        head, _, index = value.partition(":")
        if head not in {"auto", "cpu", "cuda"} or (index and not index.isdigit()):
            raise ValueError(f"got {value!r}; accepted: auto, cpu, cuda, cuda:N")
        return value

    @field_validator("cuda_graphs", "compile", mode="before")
    @classmethod
    def _graphs_switch(cls, value: object) -> object:
        if isinstance(value, bool):  # YAML 1.1 reads a bare on/off as true/false
            return "on" if value else "off"
        if value not in ("auto", "on", "off"):
            raise ValueError(f"got {value!r}; accepted: auto, on, off")
        return value

    @field_validator("num_threads", mode="before")
    @classmethod
    def _threads(cls, value: object) -> object:
        if (
            value is None
            or value == "auto"
            or (isinstance(value, int) and not isinstance(value, bool) and value >= 1)
        ):
            return value
        raise ValueError(f"got {value!r}; accepted: auto, a positive integer, or null (torch's default)")

    @field_validator("data_dir")
    @classmethod
    def _known_scheme(cls, value: str) -> str:
        problem = url_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("exp_name")
    @classmethod
    def _plain_name(cls, value: str) -> str:
        problem = exp_name_problem(value)
        if problem:
            raise ValueError(problem)
        return value


class EnvCfg(StrictModel):
    """Which env to build and the keyword arguments its constructor takes."""

    id: str = "CartPole"
    """A registered torch env (``CartPole``, ``Pendulum``), an envpool id (``HalfCheetah-v5``,
    ``CheetahRun-v1``, ``PandaPickCube-v1``), a gymnasium id (``CartPole-v1``), an ``rlpipe.envs``
    entry point, or ``package.module:ClassOrFactory`` (``rlpipe envs`` lists them)."""
    backend: Literal["auto", "torch", "envpool", "gymnasium", "mjlab", "isaaclab"] = "auto"
    """Who simulates ``id``: ``auto`` tries the torch registry, then envpool, then gymnasium;
    ``mjlab`` builds an mjlab task id (``Mjlab-Velocity-Flat-Unitree-Go1``; the mjlab extra);
    ``isaaclab`` builds an Isaac Lab task (``Isaac-Cartpole``; docs: Isaac Lab)."""
    cfg: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments of the env's constructor (unknown ones are errors)."""


class StoreCfg(StrictModel):
    """Where and how rollouts are stored."""

    enabled: bool = True
    """Write every rollout to ``<data_dir>/<exp_name>/rollouts/iter-NNNNNN.zarr``."""
    keep_last: int | None = Field(default=None, ge=1)
    """Keep only the newest K rollouts (``null``: keep all)."""
    codec: Literal["none", "blosc-lz4", "blosc-zstd", "zstd"] = "none"
    """Compression codec of every array but the image groups; the default is chosen by
    ``benchmarks/speed/store_codecs.py`` on robot rollouts (docs: the rollout store)."""
    image_codec: Literal["none", "blosc-lz4", "blosc-zstd", "zstd"] = "zstd"
    """Compression codec of the image groups (uint8 ``obs/<key>`` ``[N, T+1, C, H, W]``); the default
    is chosen by ``benchmarks/speed/image_store.py`` on stored PixelCartPole rollouts."""
    queue_size: int = Field(default=1, ge=1)
    """Rollouts the background writer may hold (the one being written included) before ``submit``
    blocks (back-pressure); each is one rollout of memory beyond the collector's buffer."""
    chunk_envs: int = Field(default=1024, ge=1)
    """Envs per Zarr chunk (each chunk holds the whole T+1 time axis)."""
    writer: Literal["auto", "process", "thread"] = "auto"
    """Who writes the stores: ``process`` (a writer process fed from shared memory, so the writes never
    hold the training interpreter's lock), ``thread`` (a thread of the training process), ``auto``
    (the process where the platform has anonymous shared memory, else the thread). A run directory
    on object storage (``s3://…``) is always written by the thread."""
    writer_timeout_s: float = Field(default=600.0, gt=0, allow_inf_nan=False)
    """Seconds the run waits for the writer process to answer (one store written, or a hand-over)
    before it stops that process and fails (exit 1, resumable); it warns, naming the process, long
    before. The writer thread is waited on as long, then given up (it cannot be stopped from
    outside). Raise it for rollouts that take longer than this to write to a slow disk."""
    every: int = Field(default=1, ge=1)
    """Store iteration k only when k is a multiple of ``every`` (1: every iteration). Costs 1/every
    of the bytes; the stored iterations are whole, replayed from their checkpoints."""
    envs: int | None = Field(default=None, ge=1)
    """Store only the first M envs of each rank (``null``: all ``trainer.num_envs``). The same envs
    every iteration, so their episodes stay whole across iterations (datasets, distillation); such
    a store is not complete, so it is not replayed."""
    precision: dict[str, PrecisionName] = Field(default_factory=dict)
    """Observation groups stored in a lower precision, converted on the device before the copy to
    the host: ``{obs: float16}`` (every observation array) or ``{obs/policy: float16}`` (one entry
    of a dict observation). Halves those bytes; such a store is not exact, so it is not replayed."""
    action_mean: bool = False
    """Also store the policy's deterministic action at every step (``action_mean`` ``[N, T+1, *act]``:
    the Gaussian mean, the Beta's mapped mode, the categorical argmax), the clean behaviour-cloning
    label ``rlpipe dataset --action mean`` exports. Costs one more action array per store and one
    batched actor forward per rollout (a second core step per env step for a recurrent policy)."""
    budget: StoreBudgetCfg | None = None
    """``{total_tb: T}`` or ``{rate_gb_s: R, env_steps_per_s: S}``: the store keeps every k-th
    iteration, k derived from the rollout's bytes (after ``envs`` and ``precision``) before the
    first iteration; the banner prints it. Replaces ``every`` (set one of them)."""

    @field_validator("precision")
    @classmethod
    def _observation_groups(cls, value: dict[str, str]) -> dict[str, str]:
        for group in value:
            problem = precision_group_problem(group)
            if problem:
                raise located_error("StoreCfg", [((group,), problem, group)])
        return value

    @model_validator(mode="after")
    def _budget_or_every(self) -> Self:
        if self.budget is not None and self.every != 1:
            raise located_error(
                "StoreCfg",
                [
                    (
                        ("every",),
                        "store.budget derives every; set one of store.every and store.budget",
                        self.every,
                    )
                ],
            )
        return self


class CheckpointCfg(StrictModel):
    """Checkpoint frequency beyond ``trainer.save_freq``, and retention."""

    keep_last: int | None = Field(default=None, ge=1)
    """Keep only the newest K checkpoints besides the best (``null``: keep all)."""
    every_iteration: bool = False
    """Also checkpoint after every iteration, so ``rlpipe replay`` starts every stored rollout from
    the exact weights it was collected with (otherwise it rebuilds them from the previous checkpoint)."""


class TrackingCfg(StrictModel):
    """Experiment tracking."""

    backend: Literal["mlflow", "none"] = "mlflow"
    """``mlflow`` or ``none``."""
    uri: str | None = None
    """MLflow tracking URI; ``MLFLOW_TRACKING_URI`` wins, default ``sqlite:///<project>/data/mlflow.db``."""


class EvalCfg(StrictModel):
    """Offline evaluation of a saved checkpoint (``rlpipe eval``, the DVC ``evaluate`` stage)."""

    num_envs: int = Field(default=16, ge=1)
    """Parallel eval envs."""
    num_episodes: int = Field(default=4, ge=1)
    """Finished episodes per eval env."""
    deterministic: bool = True
    """Act with the policy's mode (``true``) or sample from it (``false``)."""
    seed: Seed | None = None
    """Seed of the eval envs (0 to 2**31 - 1); ``null``: derived from ``trainer.seed`` (a stream
    disjoint from training)."""
    video: bool = False
    """Record the eval episodes of the first ``video_envs`` eval envs to
    ``<run_dir>/eval/video-iter-NNNNNN.mp4`` (MLflow artifacts under ``eval/``) — at every online
    eval of ``rlpipe run`` and in ``rlpipe eval``. Needs an env that renders (MuJoCo: ``MUJOCO_GL``)."""
    video_envs: int = Field(default=2, ge=1)
    """Eval envs filmed (tiled side by side in one video)."""
    video_freq: int | None = Field(default=None, ge=1)
    """Env steps between filmed online evals of ``rlpipe run`` (``null``: film every eval); the
    evals in between only score. The last iteration's eval is always filmed. Software-rendered
    frames are slow, so a run evaluating often films every few evals."""


def _below(exc: ValidationError, where: tuple[str, ...]) -> ValidationError:
    """``exc``'s errors located below ``where`` of the run's params."""
    return located_error("RunConfig", [((*where, *e["loc"]), e["msg"], e.get("input")) for e in exc.errors()])


class ReplayCfg(StrictModel):
    """Overrides applied when stored rollouts are re-optimized offline (``rlpipe replay``)."""

    algorithm: dict[str, Any] = Field(default_factory=dict)
    """Partial ``algorithm`` block, e.g. ``{cfg: {clip_coef: 0.1}}``."""
    policy: dict[str, Any] = Field(default_factory=dict)
    """Partial ``policy`` block merged over the run's, e.g. ``{name: actor_only, distribution:
    tanh_gaussian}``; only for an off-policy ``replay.algorithm`` (SAC, TD3), which trains a fresh
    policy from the stores (an on-policy replay starts from the run's checkpoints, its policy)."""


def merged_replay_policy(policy: PolicyCfg, override: dict[str, Any]) -> PolicyCfg:
    """``policy`` with ``replay.policy`` merged over it (nested mappings key by key).

    Raises the ``ValidationError`` located below ``policy`` (an unknown key lists the accepted ones).
    """
    if not override:
        return policy
    try:
        return PolicyCfg.model_validate(_deep_merge(policy.model_dump(exclude_unset=True), override))
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            loc = error["loc"]
            if error["type"] == "extra_forbidden":
                problems.append((loc, unknown_key(field_model(PolicyCfg, loc[:-1]), str(loc[-1])), {}))
            else:
                problems.append((loc, error["msg"], error.get("input")))
        raise located_error("PolicyCfg", problems) from None


def _deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``override``'s keys; where both hold a mapping, merged the same way."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


class RunConfig(StrictModel):
    """The whole experiment: one attribute per ``params.yaml`` section."""

    trainer: TrainerCfg = Field(default_factory=TrainerCfg)
    env: EnvCfg = Field(default_factory=EnvCfg)
    policy: PolicyCfg = Field(default_factory=PolicyCfg)
    algorithm: AlgorithmBlock = Field(default_factory=lambda: AlgorithmBlock.model_validate({}))
    """``{name, cfg}``: one block class per algorithm name, ``cfg`` typed by its config class."""
    store: StoreCfg = Field(default_factory=StoreCfg)
    checkpoint: CheckpointCfg = Field(default_factory=CheckpointCfg)
    tracking: TrackingCfg = Field(default_factory=TrackingCfg)
    replay: ReplayCfg = Field(default_factory=ReplayCfg)
    eval: EvalCfg = Field(default_factory=EvalCfg)

    @model_validator(mode="after")
    def _stored_envs_exist(self) -> Self:
        """``store.envs`` names a subset of each rank's ``trainer.num_envs``."""
        envs = self.store.envs
        if envs is not None and envs > self.trainer.num_envs:
            raise located_error(
                "RunConfig",
                [
                    (
                        ("store", "envs"),
                        f"got {envs}; at most trainer.num_envs "
                        f"({self.trainer.num_envs}), the envs of each rank",
                        envs,
                    )
                ],
            )
        return self

    @model_validator(mode="after")
    def _replay_overrides_fit(self) -> Self:
        """``replay.algorithm`` and ``replay.policy`` merged over the run's validate too: refused at load."""
        block = self.algorithm
        if self.replay.algorithm:
            try:
                block = merged_replay_block(self.algorithm, self.replay.algorithm)
            except ValidationError as exc:
                raise _below(exc, ("replay", "algorithm")) from None
        if self.replay.policy:
            if not isinstance(block.cfg, OffPolicyCfg | UnresolvedCfg):
                raise located_error(
                    "RunConfig",
                    [
                        (
                            ("replay", "policy"),
                            f"only an off-policy replay algorithm (sac, td3) trains a fresh policy; "
                            f"{block.name} replays from the run's checkpoints, with the run's policy; "
                            "accepted: {} here, or set replay.algorithm.name",
                            self.replay.policy,
                        )
                    ],
                )
            try:
                merged_replay_policy(self.policy, self.replay.policy)
            except ValidationError as exc:
                raise _below(exc, ("replay", "policy")) from None
        return self

    @model_validator(mode="after")
    def _replay_memory_rebuildable(self) -> Self:
        """An off-policy run stores what ``--resume`` rebuilds its replay ring from: every rollout, whole.

        The ring is never checkpointed, so with the store on, every iteration's rollout is kept
        exact and complete, at least the ring's rollouts of them (``store.keep_last``).
        """
        algo = self.algorithm.cfg
        if not (isinstance(algo, OffPolicyCfg) and self.store.enabled):
            return self
        ring = replay_rollouts(algo.replay_size, self.trainer.num_envs, self.trainer.buffer_size)
        store = self.store
        why = "the replay ring is rebuilt from the stores on --resume"
        problems: list[tuple[tuple[str, ...], str, Any]] = []
        if store.every != 1:
            problems.append((("store", "every"), f"got {store.every}; an off-policy run needs 1 ({why})", 1))
        if store.envs is not None and store.envs != self.trainer.num_envs:
            problems.append((("store", "envs"), f"got {store.envs}; an off-policy run needs null ({why})", 1))
        if store.precision:
            problems.append(
                (
                    ("store", "precision"),
                    f"an off-policy run needs {{}}, exact stores ({why})",
                    store.precision,
                )
            )
        if store.budget is not None:
            problems.append(
                (
                    ("store", "budget"),
                    f"an off-policy run needs null, every store kept ({why})",
                    store.budget.model_dump(exclude_none=True),
                )
            )
        if store.keep_last is not None and store.keep_last < ring:
            problems.append(
                (
                    ("store", "keep_last"),
                    f"got {store.keep_last}; at least the ring's {ring} rollouts "
                    f"(algorithm.cfg.replay_size / (num_envs × buffer_size)) or null ({why})",
                    store.keep_last,
                )
            )
        if problems:
            raise located_error("RunConfig", problems[:1])
        return self

    @property
    def run_dir(self) -> AnyPath:
        """``<data_dir>/<exp_name>``: every output of this experiment lives below it."""
        return location(self.trainer.data_dir) / self.trainer.exp_name
