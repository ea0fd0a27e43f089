#!/usr/bin/env python3
"""check-circles.py - no two C files call each other, directly or round a loop.

A call edge A -> B: file A names a function that file B defines and does not
make static (docs/architecture.md, "The layout"). Files that call each other
round a loop are one knot: change one and the others move with it. The rule
(issue 22): every such circle is cut at its cause, by moving what both sides
share one floor down.

Reads the tracked .c files outside tests/ and bench/ (comments and strings
removed, definitions found at brace depth 0), prints each circle with the
names that tie it, then one "N passed, N failed" line: one check for the
whole tree. --floors prints each file's floor (0: calls no other file);
--edges FOLDER prints which file of FOLDER calls which (the call graph).
"""
import re
import subprocess
import sys

TOKEN = re.compile(r"[A-Za-z_]\w*")
CALLISH = re.compile(r"([A-Za-z_]\w*)\s*\(")
COMMENT_OR_STRING = re.compile(
    r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "defined"}


def blank(match):
    text = match.group(0)
    return "" if text.startswith("/") else '""'


def top_level_definitions(src):
    """Names of the functions defined in src (comments and strings removed)
    whose definition is not static."""
    names, depth, start = set(), 0, 0
    for i, ch in enumerate(src):
        if ch == "{":
            if depth == 0:
                head = src[start:i]
                calls = CALLISH.findall(head)
                if calls and head.rstrip().endswith(")") and "=" not in head:
                    name = calls[0]
                    words = head.split(name, 1)[0]
                    if name not in KEYWORDS and "static" not in words.split() \
                            and "typedef" not in words and "struct" != words.strip():
                        names.add(name)
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                start = i + 1
        elif ch == ";" and depth == 0:
            start = i + 1
    return names


def read_sources():
    files = subprocess.run(["git", "ls-files", "*.c"], capture_output=True, text=True,
                           check=True).stdout.split()
    files = [f for f in files if not f.startswith(("tests/", "bench/"))]
    texts = {}
    for f in files:
        with open(f, encoding="utf-8", errors="replace") as fh:
            src = COMMENT_OR_STRING.sub(blank, fh.read()).replace("\\\n", " ")
        texts[f] = "\n".join(l for l in src.split("\n") if not l.lstrip().startswith("#"))
    return texts


# The agent (runtime/agent/inside/, build/snapfs-agent) is a program of its
# own, linked with the daemon's wire.c alone: its names and the daemon's
# (main, exec_kill) never meet, so each program's calls are found in it only.
AGENT = "runtime/agent/inside/"
SHARED = {"runtime/agent/wire.c"}


def program(f):
    return "agent" if f.startswith(AGENT) else "daemon"


def call_edges(texts):
    owners = {"agent": {}, "daemon": {}}
    for f, src in texts.items():
        for name in top_level_definitions(src):
            for prog in (("agent", "daemon") if f in SHARED else (program(f),)):
                owners[prog].setdefault(name, f)
    edges = {f: {} for f in texts}
    for f, src in texts.items():
        owner = owners[program(f)]
        for tok in set(TOKEN.findall(src)):
            g = owner.get(tok)
            if g and g != f:
                edges[f].setdefault(g, []).append(tok)
    return edges


def circles(edges):
    """Tarjan's strongly connected components of more than one file."""
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def floors(edges):
    memo = {}

    def floor(v, seen=()):
        if v in memo:
            return memo[v]
        if v in seen:
            return 0
        memo[v] = 1 + max((floor(w, seen + (v,)) for w in edges[v]), default=-1)
        return memo[v]

    return {v: floor(v) for v in edges}


def main():
    edges = call_edges(read_sources())
    if "--floors" in sys.argv:
        for v, fl in sorted(floors(edges).items(), key=lambda x: (-x[1], x[0])):
            print(f"{fl:3d}  {v}")
    if "--edges" in sys.argv[:-1]:
        folder = sys.argv[sys.argv.index("--edges") + 1].rstrip("/") + "/"
        strip = lambda f: f[len(folder):].removesuffix(".c")
        floor_of = floors(edges)
        for v in sorted(edges, key=lambda f: (-floor_of[f], f)):
            if v.startswith(folder):
                inside = sorted(strip(w) for w in edges[v] if w.startswith(folder))
                print(f"{strip(v)} -> {', '.join(inside) or '(none)'}")
    found = circles(edges)
    for comp in found:
        print(f"not ok circle of {len(comp)} files: {', '.join(comp)}")
        for a in comp:
            for b in comp:
                if b in edges[a]:
                    print(f"  {a} -> {b}: {', '.join(sorted(set(edges[a][b]))[:6])}")
    if not found:
        print(f"ok   no circle among the calls of {len(edges)} C files")
    print(f"{0 if found else 1} passed, {1 if found else 0} failed")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
