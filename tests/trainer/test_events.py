"""Events at stage boundaries: the params ``events`` block, Python handlers, stop and failure."""

from __future__ import annotations

import csv
import json

import pytest
from _offline_fixtures import PARAMS, set_args, tiny_cfg
from click.testing import CliRunner

from rlpipe.cli import cli
from rlpipe.trainer import Callback, Events, Trainer
from rlpipe.trainer.events import EVENTS


def calls(path):
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_params_events_block_fires_at_its_intervals(tmp_path):
    log = tmp_path / "calls.jsonl"
    events = (
        f"trainer.events={{train: {{every2: {{func: '_event_fns:record', mode: interval, "
        f"interval_step: 2, params: {{path: '{log}', tag: two}}}}, once: {{func: '_event_fns:record', "
        f"mode: startup, params: {{path: '{log}', tag: start}}}}}}}}"
    )
    result = CliRunner().invoke(cli, ["run", str(PARAMS), *set_args(tmp_path, events)])
    assert result.exit_code == 0, result.output
    got = [(c["tag"], c["event"], c["iteration"]) for c in calls(log)]
    # 4 iterations: startup once, the interval event at iterations 1 and 3 (every 2nd call)
    assert got == [("start", "run_start", 0), ("two", "after_update", 1), ("two", "after_update", 3)]


def test_python_handlers_see_each_boundary_and_can_log(tmp_path):
    seen = []

    class Spy(Callback):
        def on_after_collect(self, ctx):
            seen.append(("collect", ctx.iteration, tuple(ctx.rollout.batch_size)))

        def on_after_checkpoint(self, ctx):
            seen.append(("checkpoint", ctx.iteration, ctx.checkpoint.name))

    trainer = Trainer(tiny_cfg(tmp_path))
    trainer.add_callback(Spy())
    trainer.add_event("after_update", lambda ctx: ctx.log("custom/double_iter", 2 * ctx.iteration))
    trainer.train()
    assert ("collect", 1, (8, 17)) in seen and ("checkpoint", 4, "ckpt-000004.pt") in seen
    rows = list(csv.DictReader((tmp_path / "cartpole_ppo" / "curve.csv").open()))
    assert [float(r["custom/double_iter"]) for r in rows] == [2.0, 4.0, 6.0, 8.0]


def test_a_named_handler_keeps_its_params_apart_and_its_metric_gets_a_console_column(tmp_path, capsys):
    got = []

    def wind(ctx, name, every):  # the handler's own `name` and `every`, not add_event's
        got.append((name, every))
        ctx.log("dr/wind", 0.25 * ctx.iteration, column="wind")

    trainer = Trainer(tiny_cfg(tmp_path))
    trainer.add_event("after_update", wind, every=2, name="wind", params={"name": "gust", "every": 7})
    trainer.train()
    assert got == [("gust", 7), ("gust", 7)]  # iterations 1 and 3
    lines = capsys.readouterr().out.splitlines()
    header = next(line for line in lines if line.split()[-2:] == ["wind", "eta_s"])
    assert header.split()[0] == "iter"
    rows = [line.split() for line in lines if line.split()[:1] == ["3"]]
    assert rows and rows[0][-2] == "0.75"  # the column shows the metric of its iteration


def test_a_failing_handler_is_named_by_its_name_not_an_object_repr(tmp_path):
    class Gust:
        def __call__(self, ctx):
            raise RuntimeError("no wind")

    trainer = Trainer(tiny_cfg(tmp_path))
    trainer.add_event("after_update", Gust(), name="gust")
    with pytest.raises(Exception, match=r"^event handler gust failed at after_update \(iteration 1\)"):
        trainer.train()
    unnamed = Trainer(tiny_cfg(tmp_path / "b"))
    unnamed.add_event("after_update", Gust())
    with pytest.raises(Exception, match=r"^event handler .*Gust failed at after_update"):
        unnamed.train()


def test_a_handler_returning_false_stops_cleanly_with_a_checkpoint(tmp_path):
    trainer = Trainer(tiny_cfg(tmp_path))
    trainer.add_event("after_update", lambda ctx: ctx.iteration < 2)
    summary = trainer.train()
    assert summary["iterations"] == 2 and summary["stopped_by"] == "event after_update"
    assert (tmp_path / "cartpole_ppo" / "checkpoints" / "ckpt-000002.pt").is_file()


def test_a_raising_handler_is_one_line_naming_handler_and_event(tmp_path):
    events = "trainer.events={train: {boom: {func: '_event_fns:explode'}}}"
    result = CliRunner().invoke(cli, ["run", str(PARAMS), *set_args(tmp_path, events)])
    assert result.exit_code == 1
    line = result.output.strip().splitlines()[-1]
    assert line.startswith("Error: event handler boom failed at after_update (iteration 1)")
    assert "ZeroDivisionError" in line


def test_unknown_function_or_event_is_a_config_error(tmp_path):
    result = CliRunner().invoke(
        cli,
        [
            "run",
            str(PARAMS),
            *set_args(tmp_path, "trainer.events={train: {x: {func: 'no_such_module_xyz:f'}}}"),
        ],
    )
    assert result.exit_code == 2
    assert "trainer.events.train.x.func: cannot import module 'no_such_module_xyz'" in result.output
    with pytest.raises(ValueError, match="accepted: " + ", ".join(EVENTS)):
        Events().add("after_lunch", print)


def test_the_camera_event_without_imageio_names_the_video_extra(tmp_path, monkeypatch):
    import sys

    from rlpipe.config import ConfigError
    from rlpipe.trainer import builtin_events

    monkeypatch.setitem(sys.modules, "imageio", None)
    with pytest.raises(
        ConfigError,
        match=r"^event record_camera_data_async needs imageio: "
        r"pip install 'rlpipe\[video\]'",
    ):
        builtin_events._writer(tmp_path / "v" / "a.mp4", fps=10)
    assert not (tmp_path / "v").exists()
