"""`kubectl kai ...` runs the `kubectl-kai` script with the words after `kai`: the same
commands, introduced under the name the user typed."""

from __future__ import annotations

import pytest

from kai.cli.main import kubectl_main


def test_the_plugin_offers_the_live_commands_as_kubectl_kai(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.argv", ["kubectl-kai", "why", "--help"])
    with pytest.raises(SystemExit) as stop:
        kubectl_main()
    assert stop.value.code == 0
    usage = capsys.readouterr().out
    assert usage.startswith("usage: kubectl kai why ")
    assert "podgroup/NAME" in usage
