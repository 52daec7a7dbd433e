"""One error line per failure: under torchrun only rank 0 prints it, every rank hands it to the launcher."""

from __future__ import annotations

import json

import pytest

from rlpipe.cli import common


def fail(monkeypatch, capsys, tmp_path, rank: str | None) -> tuple[str, dict | None]:
    error_file = tmp_path / "error.json"
    if rank is not None:
        monkeypatch.setenv("RANK", rank)
        monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(error_file))
    else:
        monkeypatch.delenv("RANK", raising=False)
        monkeypatch.delenv("TORCHELASTIC_ERROR_FILE", raising=False)
    monkeypatch.setattr(common, "OTHER_RANKS_WAIT_S", 0.0)
    with pytest.raises(SystemExit) as info:
        common.fail("params.yaml: trainer.x: unknown key\nsecond line", 2)
    assert info.value.code == 2
    written = json.loads(error_file.read_text()) if error_file.is_file() else None
    return capsys.readouterr().err, written


def test_a_plain_process_prints_one_line(monkeypatch, capsys, tmp_path):
    err, written = fail(monkeypatch, capsys, tmp_path, None)
    assert err == "Error: params.yaml: trainer.x: unknown key\n" and written is None


def test_rank_zero_prints_and_names_the_error_in_torchruns_report(monkeypatch, capsys, tmp_path):
    err, written = fail(monkeypatch, capsys, tmp_path, "0")
    assert err == "Error: params.yaml: trainer.x: unknown key\n"
    # torchrun's report shows extraInfo.py_callstack as the failure's "traceback"
    assert written["message"]["extraInfo"]["py_callstack"] == "Error: params.yaml: trainer.x: unknown key"


def test_other_ranks_stay_silent_but_tell_the_launcher(monkeypatch, capsys, tmp_path):
    err, written = fail(monkeypatch, capsys, tmp_path, "1")
    assert err == ""
    assert written["message"]["message"] == "Error: params.yaml: trainer.x: unknown key"
