"""The package installs offline from Debian's packages alone, as docs/python.md says, and its
wheel is pure Python (a Raspberry Pi needs no compiler)."""

import os
import shutil
import subprocess
import sys

from conftest import ROOT


def copy_of_the_package(tmp_path):
    # A copy, so that the build's leftovers (build/, *.egg-info) never land in the repository.
    source = tmp_path / "python"
    shutil.copytree(os.path.join(ROOT, "clients", "python"), source,
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    return str(source)


def test_wheel_is_pure_python(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-index",
                    "--no-build-isolation", "-w", str(tmp_path / "dist"),
                    copy_of_the_package(tmp_path)], check=True, capture_output=True)
    wheels = os.listdir(tmp_path / "dist")
    assert len(wheels) == 1 and wheels[0].endswith("-py3-none-any.whl"), wheels
    listing = subprocess.run([sys.executable, "-m", "zipfile", "-l",
                              str(tmp_path / "dist" / wheels[0])], capture_output=True,
                             text=True, check=True).stdout
    assert "dhpt/v1/study_service_pb2_grpc.py" in listing  # The generated stubs ship.


def test_offline_install_in_a_venv_with_debians_packages(scheduler, tmp_path):
    # docs/python.md's commands: a venv that sees Debian's python3-grpcio and python3-protobuf.
    venv = tmp_path / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", str(venv)],
                   check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "--no-index", "--no-build-isolation",
                    copy_of_the_package(tmp_path)], check=True, capture_output=True)
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-c",
         "import dhpt; s = dhpt.create_study('pip', space={'x': (0.0, 1.0)}, max_trials=1);"
         "s.tell(s.ask(), 0.5); print(s.refresh().state, dhpt.__file__)"],
        cwd=tmp_path, env={**os.environ, "DHPT_SCHEDULER": scheduler.address},
        capture_output=True, text=True, check=True).stdout.split()
    assert out[0] == "COMPLETED" and out[1].startswith(str(venv))  # The installed copy ran.
