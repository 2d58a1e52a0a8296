"""The skip logic for the shared corpora, both ways: absent -> skipped with a line naming the path and P4SEC_SHARED;
absent under CI=true -> a failure; present -> the path."""
import pytest
from conftest import require_shared


def test_absent_corpus_skips_with_path_and_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("P4SEC_SHARED", str(tmp_path / "nowhere"))
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception) as e:
        require_shared("conformance/p4c-stf")
    assert str(tmp_path / "nowhere" / "conformance" / "p4c-stf") in str(e.value)
    assert "P4SEC_SHARED" in str(e.value)


def test_absent_corpus_under_ci_fails(tmp_path, monkeypatch):
    monkeypatch.setenv("P4SEC_SHARED", str(tmp_path / "nowhere"))
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception) as e:
        require_shared("conformance/p4c-stf")
    assert "P4SEC_SHARED" in str(e.value) and "CI=true" in str(e.value)


def test_present_corpus_is_returned(tmp_path, monkeypatch):
    (tmp_path / "conformance" / "p4c-stf").mkdir(parents=True)
    monkeypatch.setenv("P4SEC_SHARED", str(tmp_path))
    monkeypatch.setenv("CI", "true")
    assert require_shared("conformance/p4c-stf") == tmp_path / "conformance" / "p4c-stf"
