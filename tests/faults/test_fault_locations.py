"""Run locations that cannot hold a run: one line naming ``trainer.data_dir``, exit 2, nothing written."""

from __future__ import annotations

from _fault_harness import error_line, rlpipe, run_command


def test_data_dir_that_is_a_file_says_so_and_exits_2(tmp_path):
    target = tmp_path / "afile"
    target.write_text("not a folder")
    result = rlpipe(*run_command(tmp_path / "afile"))
    assert result.returncode == 2, result.stderr
    assert error_line(result) == (
        f"Error: trainer.data_dir: {target} is a file, not a directory; choose a "
        "folder rlpipe can create and write"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


def test_data_dir_under_proc_is_one_line_and_exit_2(tmp_path):
    result = rlpipe(*run_command(tmp_path / "x", "trainer.data_dir=/proc"))
    assert result.returncode == 2, result.stderr
    assert error_line(result).startswith("Error: trainer.data_dir: no folder can be created in /proc (")
