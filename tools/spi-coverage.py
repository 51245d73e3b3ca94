#!/usr/bin/env python3
"""Each DAT call our libdat2 exports, with the conformance tests that name it.

    tools/spi-coverage.py <libdat2.so.2> [tests/conformance]

Prints a Markdown table: the call, how many tests (TEST/TEST_P bodies) name
it, in which suites, whether the suites' fixtures and helpers call it (then
every test using them exercises it too), and whether hostile_test calls it
with bad handles and arguments. A call no test names is listed with 0: that
is a gap to close, not to hide.
"""
import os
import re
import subprocess
import sys


def exported_calls(lib):
    out = subprocess.run(["nm", "-D", "--defined-only", lib], check=True, capture_output=True, text=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        sym = parts[2].split("@")[0] if len(parts) == 3 else ""
        if parts[1:2] and parts[1] in "TW" and re.fullmatch(r"dat_[a-z0-9_]+", sym):
            names.add(sym)
    return sorted(names)


def test_blocks(path):
    """(test name, body) for each TEST/TEST_P/TEST_F; the rest of the file as helpers."""
    text = open(path, encoding="utf-8", errors="replace").read()
    starts = [m for m in re.finditer(r"^TEST(?:_P|_F)?\((\w+),\s*(\w+)\)", text, re.M)]
    blocks, helpers = [], text[: starts[0].start()] if starts else text
    for i, m in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else len(text)
        blocks.append((f"{m.group(1)}.{m.group(2)}", text[m.start():end]))
    return blocks, helpers


def main():
    lib = sys.argv[1]
    top = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    dirs = sys.argv[2:] or [os.path.join(top, "tests", d) for d in ("conformance", "registry", "core")]
    calls = exported_calls(lib)
    suites, helper_text, hostile_text = {}, "", ""
    for tdir in dirs:
        for name in sorted(os.listdir(tdir)):
            path = os.path.join(tdir, name)
            if name == "hostile_test.cpp":
                hostile_text = open(path, encoding="utf-8", errors="replace").read()
            elif name.endswith("_test.cpp"):
                blocks, helpers = test_blocks(path)
                suites[name[:-4]] = blocks
                helper_text += helpers
            elif name.endswith((".cpp", ".hpp", ".c")):
                helper_text += open(path, encoding="utf-8", errors="replace").read()
    print("| call | tests naming it | suites (tests) | fixtures call it | hostile_test |")
    print("|---|---|---|---|---|")
    for call in calls:
        pat = re.compile(r"\b" + re.escape(call) + r"\b")
        n, where = 0, []
        for suite, blocks in suites.items():
            k = sum(1 for _, body in blocks if pat.search(body))
            if k:
                n += k
                where.append(f"{suite} ({k})")
        helper = "yes" if pat.search(helper_text) else ""
        hostile = "yes" if pat.search(hostile_text) else ""
        print(f"| `{call}` | {n} | {', '.join(where)} | {helper} | {hostile} |")


if __name__ == "__main__":
    main()
