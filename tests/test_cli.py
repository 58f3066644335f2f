"""The command line the README starts with: ``plumbkit demo`` and ``plumbkit trace``."""

import re

import plumbkit
from plumbkit import cli


def test_demo_names_the_bottleneck_and_compares_with_autotune(tmp_path, capsys):
    assert cli.main(["demo", "--seconds", "1.5", "--files", "2", "--per-file", "48", "--rounds", "2",
                     "--data", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"=> bottleneck: map\(\w+\)", out), out
    for name in ("yours", "naive", "heuristic", "autotune", "autotune \\+ same cache", "plumbkit"):
        assert re.search(rf"^\s+{name}\s+[\d,.]+\s+IQR", out, re.M), (name, out)
    assert "predicted before any rewrite" in out and "LP bound of the best allocation" in out
    assert re.search(r"=> what plumbkit returns vs AUTOTUNE \(measured alike\): .+; "
                     r"prediction error before the fact \d+%", out), out


def test_trace_command_loads_a_file_and_saves_the_trace(tmp_path, capsys):
    source = tmp_path / "my_pipeline.py"
    source.write_text("import tensorflow as tf\n"
                      "def make_ds():\n"
                      "    return tf.data.Dataset.range(10**6).map(lambda x: x * 2).batch(8)\n")
    saved = tmp_path / "trace.json"
    assert cli.main(["trace", f"{source}:make_ds", "--seconds", "1", "--save", str(saved)]) == 0
    assert "minibatches/s" in capsys.readouterr().out
    loaded = plumbkit.Trace.load(saved)
    assert loaded.throughput > 0 and [o.label for o in loaded.ops][-1] == "range"
