#!/usr/bin/python3
"""DocsCommandsTest: the shell commands of README.md, docs/*.md and examples/ work as pasted.

Every ```sh / ```bash block of the Markdown files, and every `dhpt...` command line in the
comments of examples/, is split into logical lines (a trailing backslash continues one), and
each line is treated by what it runs:

  service   dhpt-scheduler, dhpt-cpu-worker, dhpt-gpu-worker: started as written; a scheduler
            must print "listening on", a worker must show up in `dhpt workers` of the test's
            scheduler (with its --command names), each within DEADLINE seconds, then it is
            stopped. A binary that exits first (a stray word, a bad flag) fails the test.
  dhpt      run as written against the test's scheduler, and must exit 0. `dhpt local`,
            `dhpt compare` and `submit --watch` run whole studies: they must start (print a
            line and keep running, or finish with 0) and are then interrupted (Ctrl-C).
  synopsis  a usage line (placeholders in capitals, [optional] parts): `dhpt COMMAND --help`
            must know COMMAND.
  python    python3 and .venv/bin/... (docs/python.md: a venv, pip installing the client
            offline, the examples): run as written in the test's folder, with Debian's python3
            first on PATH and DHPT_SCHEDULER set to the test's scheduler; must exit 0.
  loop      a block with `while`/`for`: run whole, as one script (the ask-and-tell loop), and
            must exit 0 with its study COMPLETED.
  parsed    what cannot run here (helm, kubectl, k3s, grpcurl, sudo, package installs, image
            builds, cmake, git checkout, the benchmarks, scripts/demo.sh and scripts/test.sh,
            which build and run everything): only `bash -n`.

Substituted, because they cannot exist here (the table SUBSTITUTIONS below): HOST:50051 and
localhost:50051 become the test's scheduler on 127.0.0.1; --listen=0.0.0.0:50051 becomes
127.0.0.1:0 (only loopback); paths under /opt/train, /path/to and /etc/dhpt become the repo's
examples and a commands file written from docs/user-code.md's commands.yaml block;
/var/lib/dhpt becomes a temp folder; --require-gpu is dropped on a machine without a CUDA
device. `dhpt` and `build/bin/...` are the build's binaries. my-study.yaml is README's study
with max_trials cut to 2; ./train is a stand-in that prints a loss; the ask-and-tell study
"my-study" is EXTERNAL with one trial held by another client, so the loop meets exit status
4 ("no trial now") until that client's lease (2 s) runs out.

Usage: run_doc_commands.py REPO_ROOT BIN_DIR [ONLY]   (ONLY: just the blocks whose file:line
holds this text, e.g. user-code.md)
"""

import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

DEADLINE = 60  # seconds for one command to start, register or finish
PARSE_ONLY = ("kubectl", "helm", "k3s", "sudo", "grpcurl", "apt-get", "podman", "docker",
              "debootstrap", "mount", "update-binfmts", "tar", "cmake", "CC=", "scripts/",
              "DHPT_BUILDER=", "DHPT_JETSON=", "DHPT_ARCHES=", "UBSAN_OPTIONS=",
              "/usr/bin/python3", "build/bin/dispatch_bench", "build/bin/autoencoder_bench",
              "build/bin/scale_bench", "build/bin/early_stopping_bench",
              "build/bin/pruning_bench", "build/bin/recovery_bench", "build/bin/optimizer_", "for ", "done", "ssh",
              "docs/", "build-asan/", "export ", "build/bin/importance_bench",
              "build/bin/conditional_quality_bench", "build/bin/model_choice_quality_bench",
              "nice ", "rm -f /tmp/", "bench/", "bash tests/browser/run.sh",
              "DHPT_BIN_DIR=", "cat /tmp/", "git checkout ")
PYTHON = re.compile(r"^(python3|\.venv/bin/\w+) ")
SERVICES = ("dhpt-scheduler", "dhpt-cpu-worker", "dhpt-gpu-worker", "dhpt-dashboard")
FENCE = re.compile(r"^```(\w*)\s*$")
# A usage line: [optional] parts, A|B choices or a placeholder word in capitals.
SYNOPSIS = re.compile(r"\[|\||\b(STUDY|FILE|NAME|TRIAL|DIR|ID)\b|=N\b")


def blocks(root):
    """(where, text) of every sh/bash block and every example comment that runs dhpt."""
    for path in [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md"))):
        lines = open(path, encoding="utf-8").read().split("\n")
        i = 0
        while i < len(lines):
            m = FENCE.match(lines[i])
            if m:
                j = i + 1
                while not lines[j].startswith("```"):
                    j += 1
                if m.group(1) in ("sh", "bash", "shell"):
                    yield f"{os.path.relpath(path, root)}:{i + 1}", "\n".join(lines[i + 1:j])
                i = j
            i += 1
    for path in sorted(glob.glob(os.path.join(root, "examples", "**", "*"), recursive=True)):
        if not os.path.isfile(path):
            continue
        for n, line in enumerate(open(path, encoding="utf-8").read().split("\n"), 1):
            m = re.match(r"^\s*#?\s*(dhpt(?:-\w+-worker|-scheduler)? .*?)\)?\.?\s*$", line)
            if m and "#!/" not in line:
                yield f"{os.path.relpath(path, root)}:{n}", m.group(1)


def worker_id(worker):
    return worker.get("workerId", worker.get("worker_id"))


def logical_lines(text):
    out, current, heredoc = [], "", None
    for line in text.split("\n"):
        if heredoc:  # a here-document's lines belong to the command that opened it
            out[-1] += "\n" + line
            heredoc = None if line.strip() == heredoc else heredoc
            continue
        current += line
        if current.endswith("\\"):
            current = current[:-1] + " "
            continue
        if current.strip() and not current.strip().startswith("#"):
            out.append(current.strip())
            m = re.search(r"<<-?'?(\w+)'?", current)
            heredoc = m.group(1) if m else None
        current = ""
    return out


class Run:
    def __init__(self, root, bin_dir):
        self.root, self.bin = root, bin_dir
        self.tmp = tempfile.mkdtemp(prefix="dhpt-docs-")
        self.failures = []
        self.children = []
        self.env = dict(os.environ)
        self.env.pop("DHPT_SCHEDULER", None)  # the docs' own --scheduler=HOST:50051 says where
        self.env = dict(self.env, PATH=f"{bin_dir}:{os.environ['PATH']}")
        log = open(os.path.join(self.tmp, "scheduler.log"), "w+")
        self.scheduler = subprocess.Popen(
            [os.path.join(bin_dir, "dhpt-scheduler"), "--listen=127.0.0.1:0", "--db=:memory:",
             "--client_lease=2s", "--metrics_port=-1"], stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True)
        self.address = self.wait_for_text(log, r"listening on (\S+)", self.scheduler)
        self.setup_files()
        # A worker of the test's scheduler all along: submitted studies run, compare has one.
        self.worker, _ = self.start(f"exec dhpt-cpu-worker --scheduler={self.address} "
                                    "--worker_id=docs-test --metrics_port=-1")

    def wait_for_text(self, log, pattern, process):
        deadline = time.time() + DEADLINE
        while time.time() < deadline:
            log.seek(0)
            m = re.search(pattern, log.read())
            if m:
                return m.group(1) if m.groups() else m.group(0)
            if process.poll() is not None:
                return None
            time.sleep(0.05)
        return None

    def setup_files(self):
        examples = os.path.join(self.root, "examples")
        readme = open(os.path.join(self.root, "README.md"), encoding="utf-8").read()
        study = re.search(r"```yaml\n(name: xgb-friedman\n.*?)```", readme, re.S).group(1)
        study = re.sub(r"^max_trials: \d+", "max_trials: 2", study, flags=re.M)
        open(os.path.join(self.tmp, "my-study.yaml"), "w").write(study)
        user_code = open(os.path.join(self.root, "docs", "user-code.md"), encoding="utf-8").read()
        commands = re.search(r"```yaml\n# commands.yaml\n(.*?)```", user_code, re.S).group(1)
        open(os.path.join(self.tmp, "commands.yaml"), "w").write(self.substitute(commands))
        # The docs' paths are the repository's (bench/compare-matrix.yaml, examples/...).
        for folder in ("bench", "examples", "charts", "tests"):
            os.symlink(os.path.join(self.root, folder), os.path.join(self.tmp, folder))
        with open(os.path.join(self.tmp, "train"), "w") as f:
            f.write("#!/bin/sh\necho 0.5\n")
        os.chmod(os.path.join(self.tmp, "train"), 0o755)
        self.gbr = os.path.join(examples, "commands", "sklearn_gbr.py")
        # A copy of the Python client (with its built stubs), which pip builds in place.
        shutil.copytree(os.path.join(self.root, "clients"), os.path.join(self.tmp, "clients"),
                        ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))

    def substitute(self, line):
        subs = [("HOST:50051", self.address), ("localhost:50051", self.address),
                ("--listen=0.0.0.0:50051", "--listen=127.0.0.1:0"),
                ("--listen=127.0.0.1:8080", "--listen=127.0.0.1:0"),
                ("/opt/train/sklearn_gbr.py", self.gbr_path()),
                ("/path/to/examples/commands/sklearn_gbr.py", self.gbr_path()),
                ("/path/to/sklearn_gbr.py", self.gbr_path()),
                ("/etc/dhpt/commands.yaml", os.path.join(self.tmp, "commands.yaml")),
                ("/var/lib/dhpt", self.tmp), ("build/bin/", self.bin + "/")]
        for old, new in subs:
            line = line.replace(old, new)
        if not os.path.exists("/dev/nvidia0"):
            line = line.replace(" --require-gpu", "")
        return line

    def gbr_path(self):
        return os.path.join(self.root, "examples", "commands", "sklearn_gbr.py")

    def fail(self, where, line, why):
        self.failures.append(f"{where}: `{line}`: {why}")

    def dhpt_json(self, *args):
        out = subprocess.run([os.path.join(self.bin, "dhpt"), *args, "--json",
                              "--scheduler=" + self.address], env=self.env,
                             capture_output=True, text=True, timeout=DEADLINE)
        return json.loads(out.stdout) if out.returncode == 0 else {}

    def workers(self):
        return self.dhpt_json("workers").get("workers", [])

    def check(self, where, text):
        if subprocess.run(["bash", "-n"], input=text, text=True).returncode != 0:
            self.fail(where, text, "not valid shell")
            return
        if re.search(r"^\s*(while|for) ", text, re.M):
            if not any(p in text for p in ("kubectl", "helm")):
                self.run_loop(where, text)
            return
        for line in logical_lines(text):
            self.check_line(where, line)

    def check_line(self, where, line):
        words = line.split()
        first = words[0].replace("build/bin/", "")
        if line.startswith("["):
            return  # the rest of a usage line above
        if first in SERVICES:
            self.run_service(where, line)
        elif first == "dhpt" and SYNOPSIS.search(line.split("#")[0]):
            help_run = subprocess.run([os.path.join(self.bin, "dhpt"), words[1], "--help"],
                                      capture_output=True, text=True, env=self.env)
            if help_run.returncode != 0 or "Usage:" not in help_run.stdout:
                self.fail(where, line, f"dhpt knows no command {words[1]}")
        elif first == "dhpt":
            self.run_dhpt(where, line)
        elif PYTHON.match(line):
            self.run_python(where, line)
        elif not line.startswith(PARSE_ONLY):
            self.fail(where, line, "the test does not know this command: add it to "
                      "tests/docs/run_doc_commands.py (run it, or list it as parse-only)")

    def start(self, line, env=None):
        log = open(os.path.join(self.tmp, f"out-{len(self.children)}.log"), "w+")
        process = subprocess.Popen(["bash", "-c", self.substitute(line)], cwd=self.tmp,
                                   env=env or self.env, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        self.children.append(process)
        return process, log

    def stop(self, process, sig=signal.SIGTERM):
        if process.poll() is None:
            os.killpg(process.pid, sig)
            try:
                process.wait(timeout=DEADLINE)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()

    def run_service(self, where, line):
        before = {worker_id(w) for w in self.workers()}
        # Without --scheduler a worker goes to $DHPT_SCHEDULER: the test's.
        if "dhpt-dashboard" in line and "--listen" not in line:
            line += " --listen=127.0.0.1:0"  # not 8080, which another test may hold
        process, log = self.start(line, dict(self.env, DHPT_SCHEDULER=self.address))
        if "dhpt-scheduler" in line:
            ok = self.wait_for_text(log, r"listening on \S+", process) is not None
        elif "dhpt-dashboard" in line:
            address = self.wait_for_text(log, r"dashboard at (http://\S+)", process)
            ok = address is not None and self.dashboard_answers(address)
        else:
            names = re.findall(r"--command='?(\w[\w.-]*)=", line)
            deadline, ok = time.time() + DEADLINE, False
            while not ok and process.poll() is None and time.time() < deadline:
                new = [w for w in self.workers() if worker_id(w) not in before]
                ok = any(set(names) <= set(w["capabilities"].get("commands", [])) for w in new)
                time.sleep(0.1)
        running = process.poll() is None
        self.stop(process)
        if not ok or not running:
            log.seek(0)
            self.fail(where, line, "did not start (exit status %s): %s" %
                      (process.returncode, log.read()[-2000:]))

    def dashboard_answers(self, address):
        """The dashboard's studies API answers with the test's scheduler behind it."""
        try:
            with urllib.request.urlopen(address + "api/studies", timeout=DEADLINE) as reply:
                return reply.status == 200
        except OSError:
            return False

    def run_dhpt(self, where, line):
        long_running = re.search(r"^(build/bin/)?dhpt (local|compare)\b", line)
        process, log = self.start(line)
        deadline = time.time() + (DEADLINE if long_running else 5 * DEADLINE)
        while process.poll() is None and time.time() < deadline:
            log.seek(0)
            if long_running and log.read().strip():
                break  # it started the study; what it runs is other tests' business
            time.sleep(0.1)
        finished = process.poll()
        self.stop(process, signal.SIGINT)
        if finished not in (0, None) or (finished is None and not long_running):
            log.seek(0)
            self.fail(where, line, "exit status %s: %s" % (process.returncode, log.read()[-2000:]))

    def run_python(self, where, line):
        env = dict(self.env, DHPT_SCHEDULER=self.address, PATH=f"/usr/bin:{self.env['PATH']}")
        process, log = self.start(line, env)
        try:
            process.wait(timeout=5 * DEADLINE)
        except subprocess.TimeoutExpired:
            pass
        self.stop(process)
        if process.returncode != 0:
            log.seek(0)
            self.fail(where, line, "exit status %s: %s" % (process.returncode, log.read()[-2000:]))

    def run_loop(self, where, text):
        spec = {"name": "my-study", "model": {"kind": "EXTERNAL"},
                "objective": {"metric": "loss", "goal": "MINIMIZE"},
                "parameters": [{"name": "lr", "double_range": {"min": 0.001, "max": 0.1}}],
                "max_trials": 3, "parallel_trials": 1}
        path = os.path.join(self.tmp, "my-study.json")
        json.dump(spec, open(path, "w"))
        dhpt = os.path.join(self.bin, "dhpt")
        env = dict(self.env, DHPT_SCHEDULER=self.address)
        subprocess.run([dhpt, "submit", path], env=env, check=True, capture_output=True)
        # Another client holds the one trial allowed at a time, so the loop first hears 4.
        subprocess.run([dhpt, "ask", "my-study", "--client=other"], env=env, check=True,
                       capture_output=True)
        process, log = self.start(text, dict(self.env, DHPT_SCHEDULER=self.address))
        try:
            process.wait(timeout=5 * DEADLINE)
        except subprocess.TimeoutExpired:
            pass
        self.stop(process)
        state = self.dhpt_json("studies").get("studies", [])
        state = [s.get("state") for s in state if s["spec"]["name"] == "my-study"]
        if process.returncode != 0 or state != ["COMPLETED"]:
            log.seek(0)
            self.fail(where, text.split("\n")[0], "the loop exited %s with my-study %s: %s" %
                      (process.returncode, state, log.read()[-2000:]))

    def close(self):
        for child in self.children:
            self.stop(child, signal.SIGKILL)
        self.stop(self.scheduler)
        shutil.rmtree(self.tmp, ignore_errors=True)


def main():
    root, bin_dir = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    run = Run(root, bin_dir)
    try:
        if run.address is None:
            print("the test's scheduler did not start")
            return 1
        count = 0
        only = sys.argv[3] if len(sys.argv) > 3 else ""
        for where, text in blocks(root):
            if only not in where:
                continue
            started = time.time()
            run.check(where, text)
            print(f"{where}: {time.time() - started:.1f} s", flush=True)
            count += 1
    finally:
        run.close()
    for failure in run.failures:
        print(failure)
    print(f"{count} blocks checked, {len(run.failures)} failures")
    return 1 if run.failures else 0


if __name__ == "__main__":
    sys.exit(main())
