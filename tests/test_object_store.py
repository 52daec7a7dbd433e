import pytest

from rlpipe.object_store import StorageUnavailable, with_retries


def failing(times, exc):
    calls = []

    def call():
        calls.append(1)
        if len(calls) <= times:
            raise exc
        return "ok"

    return call, calls


def test_a_transient_failure_is_retried_until_the_call_answers(monkeypatch):
    monkeypatch.setenv("RLPIPE_STORE_RETRIES", "3")
    monkeypatch.setenv("RLPIPE_STORE_BACKOFF_S", "0")
    call, calls = failing(2, ConnectionError("server down"))
    assert with_retries("s3://b/run", call) == "ok" and len(calls) == 3


def test_the_last_failure_is_one_line_naming_the_path(monkeypatch):
    monkeypatch.setenv("RLPIPE_STORE_RETRIES", "2")
    monkeypatch.setenv("RLPIPE_STORE_BACKOFF_S", "0")
    call, calls = failing(5, ConnectionError("server down\nsecond line"))
    with pytest.raises(
        StorageUnavailable, match=r"after 2 attempts \(ConnectionError: server down\): 's3://b/run/x'$"
    ) as info:
        with_retries("s3://b/run/x", call)
    assert info.value.filename == "s3://b/run/x" and len(calls) == 2


@pytest.mark.parametrize("exc", [FileNotFoundError("k"), RuntimeError("AccessDenied: no")])
def test_answers_and_refused_credentials_are_raised_at_once(monkeypatch, exc):
    monkeypatch.setenv("RLPIPE_STORE_RETRIES", "5")
    call, calls = failing(5, exc)
    with pytest.raises(type(exc)):
        with_retries("s3://b/run", call)
    assert len(calls) == 1
