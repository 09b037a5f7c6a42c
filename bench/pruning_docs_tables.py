#!/usr/bin/python3
"""Fills the generated tables of a Markdown file (docs/early-stopping.md): each block from
<!-- generated: ARGS --> to <!-- end generated --> becomes bench/pruning_report.py ARGS's output
(file patterns expanded), so that the tables come from the result files, never from hand-edited
numbers. Run from the repository's root:

  /usr/bin/python3 bench/pruning_docs_tables.py docs/early-stopping.md
"""
import glob
import re
import subprocess
import sys


def fill(match):
    args = []
    for arg in match.group(1).split():
        args += sorted(glob.glob(arg)) if "*" in arg else [arg]
    out = subprocess.run(["/usr/bin/python3", "bench/pruning_report.py"] + args,
                         capture_output=True, text=True, check=True).stdout
    return f"<!-- generated: {match.group(1)} -->\n{out.strip()}\n<!-- end generated -->"


def main(path):
    with open(path) as f:
        text = f.read()
    text = re.sub(r"<!-- generated: (.*?) -->.*?<!-- end generated -->", fill, text, flags=re.S)
    with open(path, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main(sys.argv[1])
