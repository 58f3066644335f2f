"""The command line the README starts with: ``plumbkit demo`` and ``plumbkit trace``.

The CLI runs in a subprocess here: TensorFlow's C++ runtime writes its log lines to file
descriptor 2 and reads its log level once per process, so only a fresh process shows what a
user's terminal would (this test process imported TensorFlow long ago).
"""

import io
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import plumbkit
from plumbkit import cli
from plumbkit.render.progress import ProgressPrinter

from conftest import python_module_with_ctrl_c

pytestmark = pytest.mark.concurrent  # checks what is printed or written, not a speed (tests/run)

ROOT = Path(__file__).resolve().parent.parent
#: What other libraries' logs look like: TF/absl C++ lines, absl/TF Python loggers, AutoGraph,
#: the HiGHS banner, oneDNN's notice.
FOREIGN_LOG = re.compile(r"^[IWEF]\d{4} |WARNING: All log messages before absl|WARNING:absl:|"
                         r"WARNING:tensorflow:|AutoGraph|HiGHS|oneDNN|cpu_feature_guard|"
                         r"To enable the following instructions", re.M)


def run_cli(*args: str, timeout: float = 600, **popen) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}  # the CLI sets it itself
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "plumbkit", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, **popen)


def test_demo_names_the_bottleneck_compares_with_autotune_and_prints_nothing_foreign(tmp_path):
    # two brief rounds (the user's --rounds): the output's shape is checked here, not a verdict's figures
    done = run_cli("demo", "--seconds", "1", "--files", "2", "--per-file", "48", "--protocol", "brief",
                   "--rounds", "2", "--data", str(tmp_path))
    out, err = done.stdout, done.stderr
    assert done.returncode == 0, err
    # a decode map or the sequential file reader: the two come within a few percent here
    assert re.search(r"=> bottleneck: (map|interleave)\(\w+\)", out), out
    for name in ("yours", "naive", "heuristic", "autotune", "autotune \\+ same cache", "plumbkit"):
        assert re.search(rf"^\s+{name}\s+[\d,.]+\s+IQR", out, re.M), (name, out)
    assert "predicted before any rewrite" in out and ", bound by " in out and "LP bound" not in out
    assert re.search(r"=> what plumbkit returns vs AUTOTUNE \(measured alike\): .+; "
                     r"prediction error before the fact \d+%", out), out
    # where it stands against AUTOTUNE given its own cache: among the plan's figures, said once
    assert re.search(r"^  plan over autotune \+ same cache \(.+\), measured: ", out, re.M), out
    assert out.count("plan over autotune + same cache") == 1, out
    assert not FOREIGN_LOG.search(out), FOREIGN_LOG.search(out)
    assert not FOREIGN_LOG.search(err) and err.strip() == "", err
    assert re.search(r"^  \[\s*\d+%\] \w", out, re.M)  # piped: plain progress lines


def test_ctrl_c_in_the_cli_prints_what_was_measured_and_exits_130(tmp_path):
    source = tmp_path / "slow.py"
    source.write_text("import tensorflow as tf\n"
                      "def make_ds():\n"
                      "    return tf.data.Dataset.range(10**9).map(lambda x: x * 2).batch(8)\n")
    # SIGINT at its default in the child however pytest was started (a background job ignores it)
    proc = subprocess.Popen(python_module_with_ctrl_c("plumbkit", "trace", f"{source}:make_ds", "--seconds", "60"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    lines = []
    for line in proc.stdout:  # wait until it traces
        lines.append(line)
        if "tracing" in line:
            break
    time.sleep(1.0)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert time.monotonic() - sent < 10
    out = "".join(lines) + out
    assert proc.returncode == cli.INTERRUPTED_EXIT, (out, err)
    assert "trace ended: interrupted" in out and "map(lambda)" in out
    assert "interrupted; the trace above is what was measured so far" in out


def test_progress_is_a_bar_on_a_terminal_and_lines_when_piped():
    piped = io.StringIO()
    printer = ProgressPrinter(piped, tty=False)
    for fraction, message, detail in ((0.0, "tracing", "1.0/s"), (0.1, "tracing", "2.0/s"), (0.5, "solving", "")):
        printer(message, fraction, detail)
    printer.close()
    assert piped.getvalue() == "  [  0%] tracing\n  [ 50%] solving\n"
    terminal = io.StringIO()
    printer = ProgressPrinter(terminal, tty=True)
    printer("tracing", 0.5, "2.0/s")
    printer.close()
    drawn = terminal.getvalue()
    assert drawn.startswith("\r  [############............]  50%  tracing · 2.0/s") and drawn.endswith("\n")


def test_import_without_tensorflow_says_how_to_install_it():
    code = ("import sys; sys.path = [p for p in sys.path if 'site-packages' not in p]; "
            f"sys.path.insert(0, {str(ROOT)!r}); import plumbkit")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: plumbkit needs TensorFlow") and "plumbkit[cpu]" in last, done.stderr


def test_trace_command_loads_a_file_and_saves_the_trace(tmp_path, capsys):
    source = tmp_path / "my_pipeline.py"
    source.write_text("import tensorflow as tf\n"
                      "def make_ds():\n"
                      "    return tf.data.Dataset.range(10**6).map(lambda x: x * 2).batch(8)\n")
    saved = tmp_path / "trace.json"
    assert cli.main(["trace", f"{source}:make_ds", "--seconds", "1", "--save", str(saved)]) == 0
    out = capsys.readouterr().out
    assert "minibatches/s" in out and "calibrated alone" in out
    loaded = plumbkit.Trace.load(saved)
    assert loaded.throughput > 0 and [o.label for o in loaded.ops][-1] == "range"
    assert loaded.calibrated and loaded.op("map(lambda)").cpu_from == "calibrated alone"
    assert cli.main(["trace", f"{source}:make_ds", "--seconds", "1", "--no-calibrate"]) == 0
    assert "not yet calibrated" in capsys.readouterr().out
