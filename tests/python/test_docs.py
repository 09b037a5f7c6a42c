"""The Python blocks of docs/python.md and README.md run as written, in order, against a real
scheduler."""

import os
import re
import subprocess
import sys

from conftest import ROOT


def test_python_blocks_of_the_docs_run(scheduler, tmp_path):
    blocks = []
    for page in ("docs/python.md", "README.md"):
        text = open(os.path.join(ROOT, page), encoding="utf-8").read()
        blocks += re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)
    assert len(blocks) >= 4
    env = {**os.environ, "DHPT_SCHEDULER": scheduler.address,
           "PYTHONPATH": os.path.join(ROOT, "clients", "python")}
    for block in blocks:
        run = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, f"{block}\n{run.stderr}"
