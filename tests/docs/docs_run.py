#!/usr/bin/env python3
"""Runs the command blocks of docs/*.md marked runnable and compares the lines each page shows
with the lines the run prints, so that a page cannot drift from the program.

A block is runnable when the line before its ``` fence is `<!-- run -->`. In it, a line
`$ COMMAND` (continued by a trailing backslash) runs COMMAND with bash; the lines after it, up
to the next `$`, are what it must print: each in that order among the lines of its stdout and
stderr (lines the page leaves out may come between), where `...` in a line stands for any text.
A line `(exit N)` says the command exits N (else it must exit 0). A block marked
`<!-- run: not sanitized -->` instead runs except under SANITIZE=1 (a preloaded library or a
crash's own report, which ASan's runtime changes). A page's blocks run in order
in one scratch directory of their own (`build`, `tools`, `tests`, `docs`, `labs`, `include` and the Makefile link to the
tree; docs/course/*.md are pages too), so
a later block can use the files an earlier one wrote.

usage: BUILD=build docs_run.py [PAGE...]   (default: every docs/*.md with a runnable block)
Prints one line per command ("ok", "skip" or "FAIL" with the page and line); the last line is
"docs: N passed, N failed" (", N skipped" under SANITIZE=1). Exit 1 if any failed."""
import glob
import os
import re
import subprocess
import sys
import tempfile

MARK = "<!-- run -->"
MARK_NOSAN = "<!-- run: not sanitized -->"
SANITIZED = os.environ.get("SANITIZE", "0") == "1"
TIMEOUT_S = 120


def blocks(path):
    """[(line number of the command, command, [expected lines], exit status, skipped)] of a page."""
    lines = open(path, encoding="utf-8").read().split("\n")
    out, i = [], 0
    while i < len(lines):
        if lines[i].strip() in (MARK, MARK_NOSAN) and i + 1 < len(lines) and lines[i + 1].startswith("```"):
            skip = SANITIZED and lines[i].strip() == MARK_NOSAN
            i += 2
            cmd = None
            while i < len(lines) and not lines[i].startswith("```"):
                ln = lines[i]
                if ln.startswith("$ "):
                    start, text = i + 1, ln[2:]
                    while text.endswith("\\") and i + 1 < len(lines):
                        i += 1
                        text = text + "\n" + lines[i]  # bash reads the backslash-newline as one line
                    cmd = [start, text, [], 0, skip]
                    out.append(cmd)
                elif cmd is not None:
                    m = re.fullmatch(r"\(exit (\d+)\)", ln.strip())
                    if m:
                        cmd[3] = int(m.group(1))
                    elif ln.strip():
                        cmd[2].append(ln)
                i += 1
        i += 1
    return out


def pattern(line):
    """A shown line as a regular expression over the whole printed line: `...` any text, the rest
    literal, where a run of spaces matches any run (the page may align columns its own way)."""
    line = line.strip()
    if line == "...":
        return None
    parts = [r"\s+".join(re.escape(w) for w in part.split()) for part in line.split("...")]
    return re.compile(r"\s*" + ".*".join(parts) + r"\s*$")


def check(shown, printed):
    """The first shown line not found in order in printed, or None."""
    at = 0
    for want in shown:
        pat = pattern(want)
        if pat is None:
            continue
        while at < len(printed) and not pat.match(printed[at]):
            at += 1
        if at == len(printed):
            return want
        at += 1
    return None


def run_page(root, build, page):
    results = []
    with tempfile.TemporaryDirectory(prefix="minidc-docs-") as d:
        os.symlink(os.path.abspath(build), os.path.join(d, "build"))
        for name in ("tools", "tests", "docs", "labs", "include", "Makefile"):
            os.symlink(os.path.join(root, name), os.path.join(d, name))
        # the scratch directory's build/ is the build under test: scripts a page runs find it there
        env = dict(os.environ, BUILD="build", OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
        for lineno, cmd, shown, want_rc, skip in blocks(page):
            where = f"{os.path.relpath(page, root)}:{lineno}"
            if skip:
                results.append(f"skip {where}: $ {cmd.split(chr(10))[0]} (SANITIZE=1)")
                continue
            try:
                p = subprocess.run(["bash", "-c", cmd], cwd=d, env=env, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=TIMEOUT_S)
                printed, rc = p.stdout.decode("utf-8", "replace").split("\n"), p.returncode
            except subprocess.TimeoutExpired:
                printed, rc = [], f"timeout after {TIMEOUT_S} s"
            short = cmd.split("\n")[0]
            if rc != want_rc:
                results.append(f"FAIL {where}: $ {short}: exit {rc}, the page says {want_rc}\n" +
                               "\n".join("    | " + x for x in printed[-8:]))
                continue
            missing = check(shown, printed)
            if missing is not None:
                results.append(f"FAIL {where}: $ {short}: the page shows a line the run does not print (in that "
                               f"order):\n    want: {missing}\n" + "\n".join("    | " + x for x in printed[-12:]))
            else:
                results.append(f"ok   {where}: $ {short}")
    return results


def main():
    if any(a in ("-h", "--help") for a in sys.argv[1:]):
        print(__doc__)
        return 0
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    build = os.path.join(root, os.environ.get("BUILD", "build"))
    if not os.path.exists(os.path.join(build, "minidc")):
        sys.exit(f"docs_run: {build}/minidc: no such program (make first)")
    pages = [os.path.abspath(p) for p in sys.argv[1:]] or sorted(p for p in glob.glob(os.path.join(root, "docs", "*.md")) + glob.glob(os.path.join(root, "docs", "course", "*.md")) if MARK in open(p).read() or MARK_NOSAN in open(p).read())
    passed = failed = skipped = 0
    for page in pages:
        for r in run_page(root, build, page):
            print(r, flush=True)
            passed += r.startswith("ok")
            skipped += r.startswith("skip")
            failed += r.startswith("FAIL")
    print(f"docs: {passed} passed, {failed} failed" + (f", {skipped} skipped" if skipped else ""))
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    sys.exit(main())
