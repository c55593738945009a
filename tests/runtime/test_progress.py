"""Progress: a few plain lines off a terminal, one switch that silences every bar."""

from __future__ import annotations

import io
import re
import sys
import warnings
from pathlib import Path

import pytest

from bnn.cli.main import main
from bnn.runtime import progress
from bnn.runtime.progress import PlainLinesBar, progress_bar, progress_enabled, set_progress, stages

PACKAGE_FOLDERS = ("inference", "models", "guides", "datasets", "bnn")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def no_global_choice(monkeypatch):
    monkeypatch.delenv("BNN_PROGRESS", raising=False)
    yield
    set_progress(None)


def test_off_a_terminal_a_bar_is_a_line_per_tenth_without_control_codes():
    stream = io.StringIO()
    with PlainLinesBar(total=1000, desc="SVI (autonormal)", file=stream) as bar:
        for _ in range(1000):
            bar.update()
            bar.set_postfix(elbo=-1.5, refresh=False)
    lines = stream.getvalue().splitlines()
    assert "\r" not in stream.getvalue() and "\x1b" not in stream.getvalue()
    assert [re.match(r"SVI \(autonormal\): (\d+)/1000 \((\d+)%\)", line).group(2) for line in lines] == \
        [str(10 * tenth) for tenth in range(11)]


def test_a_bar_without_a_total_and_an_interrupted_bar_end_on_their_last_count():
    stream = io.StringIO()
    with PlainLinesBar(desc="MAP (L-BFGS)", unit="eval", file=stream) as bar:
        bar.update(37)
    assert stream.getvalue().splitlines()[-1].startswith("MAP (L-BFGS): 37/?")
    stream = io.StringIO()
    with PlainLinesBar(total=100, desc="chain", file=stream) as bar:
        bar.update(35)
    assert stream.getvalue().splitlines()[-1].startswith("chain: 35/100 (35%)") and len(stream.getvalue().splitlines()) == 2


def test_stages_print_each_stage_as_it_starts(monkeypatch, capsys):
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False)
    with stages(3, desc="report") as start:
        for name in ("table", "plots", "report.md"):
            start(name)
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(",")[0] for line in lines] == ["report: 0/3 (0%)", "report: table: 0/3 (0%)", "report: plots: 1/3 (33%)",
                                                     "report: report.md: 2/3 (67%)", "report: report.md: 3/3 (100%)"]


@pytest.mark.parametrize("value, shown", [("0", False), ("off", False), ("OFF", False), ("no", False), ("1", True),
                                          ("on", True), (None, True)])
def test_the_environment_switch(monkeypatch, value, shown):
    if value is not None:
        monkeypatch.setenv("BNN_PROGRESS", value)
    assert progress_enabled() is shown
    assert progress_bar(range(3), enabled=True).disable is not shown


def test_set_progress_wins_over_the_environment_and_a_bad_value_is_named(monkeypatch):
    monkeypatch.setenv("BNN_PROGRESS", "off")
    set_progress(True)
    assert progress_enabled()
    set_progress(None)
    assert not progress_enabled()
    monkeypatch.setenv("BNN_PROGRESS", "maybe")
    with pytest.raises(ValueError, match="BNN_PROGRESS='maybe' is not understood; set it to 0/off"):
        progress_enabled()
    with pytest.raises(ValueError, match="set_progress takes True, False or None, got 'off'"):
        set_progress("off")


def test_the_callers_switch_silences_its_bar():
    assert progress_bar(range(3), enabled=False).disable


def test_every_bar_of_the_package_goes_through_the_policy():
    makers = [path for folder in PACKAGE_FOLDERS for path in (ROOT / folder).rglob("*.py")
              if path.name != "progress.py" and re.search(r"\btqdm\(|tqdm\.auto|trange\(", path.read_text())]
    assert makers == []
    assert progress.__file__.startswith(str(ROOT))


def test_a_fit_logged_to_a_file_writes_a_few_plain_lines(tmp_path, capfd):
    # in this process, its stderr captured at the file descriptor (not a terminal, as a log file is): what Python and
    # anything below it write there; the warnings a fresh process would print are counted with it
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        code = main(["fit", "--hidden", "2", "--steps", "200", "--num-samples", "5", "--out", str(tmp_path / "run")])
    text = capfd.readouterr().err + "".join(warnings.formatwarning(w.message, w.category, w.filename, w.lineno)
                                            for w in caught)
    assert code == 0 and "\r" not in text and "\x1b" not in text
    assert 11 <= len([line for line in text.splitlines() if line.startswith("SVI (meanfield)")]) <= 12
    assert len(text) < 3000


def test_a_fit_with_progress_off_writes_nothing_to_stderr(tmp_path, monkeypatch, capsys, recwarn):
    monkeypatch.setenv("BNN_PROGRESS", "0")
    assert main(["fit", "--hidden", "2", "--steps", "20", "--num-samples", "5", "--out", str(tmp_path / "run")]) == 0
    assert capsys.readouterr().err == "" and not recwarn  # no bar, no warning
