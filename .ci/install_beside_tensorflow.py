"""CI check: installing plumbkit where TensorFlow is present adds no ``tensorflow*`` distribution.

Two environments, each asked with ``pip install --dry-run --report`` what installing plumbkit
(with its notebook extra) would add:

1. this one, where the CPU wheel (``tensorflow-cpu``) is installed;
2. a fresh virtual environment holding only a stand-in ``tensorflow`` distribution (the name the
   GPU wheel has), built here from metadata alone so nothing large is downloaded.

A requirement naming one TensorFlow flavor would pull it in beside the other (both own the
``tensorflow`` package): the report of either environment would then list it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import venv
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = f"{ROOT}[jupyter]"


def would_install(python: str, *extra: str) -> list[str]:
    """Names (and versions) pip would install for plumbkit in the environment of ``python``."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        subprocess.run([python, "-m", "pip", "install", "--quiet", "--dry-run", "--prefer-binary",
                        "--report", str(report), *extra, TARGET], check=True)
        items = json.loads(report.read_text())["install"]
    return [f"{i['metadata']['name']}=={i['metadata']['version']}" for i in items]


def stand_in_tensorflow(folder: Path) -> Path:
    """A wheel named tensorflow 2.21.0 with metadata only (what pip sees of the GPU wheel)."""
    wheel = folder / "tensorflow-2.21.0-py3-none-any.whl"
    info = "tensorflow-2.21.0.dist-info"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr(f"{info}/METADATA", "Metadata-Version: 2.1\nName: tensorflow\nVersion: 2.21.0\n")
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: plumbkit-ci\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", f"{info}/METADATA,,\n{info}/WHEEL,,\n{info}/RECORD,,\n")
    return wheel


def check(where: str, names: list[str]) -> bool:
    flavors = [n for n in names if n.lower().startswith("tensorflow")]
    print(f"  {where}: would install {len(names)} distributions"
          + (f", among them {flavors}: FAIL" if flavors else ", no tensorflow*: ok"))
    return not flavors


def main() -> int:
    ok = check("with tensorflow-cpu installed", would_install(sys.executable, "--no-build-isolation"))
    with tempfile.TemporaryDirectory() as tmp:
        env = Path(tmp) / "venv"
        venv.EnvBuilder(with_pip=True).create(env)
        python = str(env / "bin" / "python")
        wheel = stand_in_tensorflow(Path(tmp))
        subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-index", str(wheel)], check=True)
        ok &= check("with (a stand-in for) the GPU wheel `tensorflow`", would_install(python))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
