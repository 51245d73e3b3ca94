#!/usr/bin/env python3
"""ABI conformance test: our dat2 headers versus Debian's libdapl-dev headers
(--api 2.0), or our DAT 1.2 dat/ headers versus illumos's (--api 1.2).

    run_abi_test.py --ours <include root containing dat2/> --work <scratch dir>
                    [--oracle /usr/include] [--clang clang] [--cc cc]
    run_abi_test.py --api 1.2 --ours <root containing dat/> --expected dat12_expected.json ...

With --write-expected FILE the oracle side (model, probe values, macro
expansions, headers that compile alone) is recorded instead of compared;
--expected FILE then stands in for --oracle, for an oracle no package
installs (dat12_oracle.py records illumos's DAT 1.2 headers this way).

1. copies the oracle's dat2/ into <work>/oracle/dat2 (so -I order cannot
   mix the two header sets; every compile runs with -H and fails if a dat2
   header from anywhere but the intended tree is used, and a "shadow" tree
   placed after -I turns a header missing from the tree under test into an
   #error instead of a silent fall-back to /usr/include/dat2);
2. generates the fact list from the oracle (gen_abi_probe.py);
3. compares the set of public names (oracle names missing in ours fail);
4. compiles the probe with the C compiler against the oracle copy and
   against ours, runs both and diffs their output;
5. compiles the prototype/type TU (compat.c) against ours: every oracle
   function re-declared with the oracle's prototype text, every typedef,
   record member and variable type checked with __builtin_types_compatible_p;
6. compares macros that are not integer/string constants by token text,
   function-like macros by arity and token text (parameter names ignored),
   function storage class (static inline vs extern), and which headers
   compile on their own.

Prints one summary line
  "abi: compared N records, M fields, ... : D differences"
and exits 1 on any difference or if the comparison cannot be made (oracle
missing, clang missing, headers not compiling, ...).
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_abi_probe as gen  # noqa: E402

MAX_PRINT = 400


class Fail(Exception):
    pass


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, **kw)


def which(prog):
    if not prog or prog.endswith("-NOTFOUND"):
        return None
    if os.path.sep in prog:
        return prog if os.access(prog, os.X_OK) else None
    return shutil.which(prog)


def is_clang(cc):
    r = run([cc, "-dM", "-E", "-x", "c", os.devnull])
    return "__clang__" in r.stdout


class Report:
    """Differences, each with a stable key (used by the accepted list)."""

    def __init__(self, accepted=None):
        self.diffs = []      # (category, text, key) -- failures
        self.accepted = []   # (category, text, key, reason)
        self.accept = dict(accepted or {})
        self.used = set()
        self.lines = []

    def diff(self, cat, text, key):
        if key in self.accept:
            self.used.add(key)
            self.accepted.append((cat, text, key, self.accept[key]))
        else:
            self.diffs.append((cat, text, key))

    def say(self, text=""):
        self.lines.append(text)
        print(text)


def make_shadow(shadow_root, header_names, label):
    d = os.path.join(shadow_root, gen.SUBDIR)
    if os.path.isdir(shadow_root):
        shutil.rmtree(shadow_root)
    os.makedirs(d)
    for h in header_names:
        gen.write(os.path.join(d, h),
                  '#error "abi test: <%s/%s> is not provided by the %s include tree"\n'
                  % (gen.SUBDIR, h, label))
    return shadow_root


def cc_compile(cc, cc_is_clang, include_root, shadow, src, out, forbidden, label, syntax_only=False):
    cmd = [cc, "-std=gnu11", "-w", "-H", "-I", include_root, "-I", shadow]
    cmd += ["-ferror-limit=0"] if cc_is_clang else ["-fmax-errors=0"]
    cmd += ["-fsyntax-only", src] if syntax_only else [src, "-o", out]
    r = run(cmd)
    probs = gen.check_include_hygiene(gen.included_files_from_H(r.stderr),
                                      os.path.join(include_root, gen.SUBDIR), forbidden, label)
    return r, probs


def compile_with_pruning(cc, cc_is_clang, model, facts, includes, tree, shadow, forbidden,
                         src, exe, skip, label):
    """Compile the probe, commenting out facts that do not compile; returns
    {fact id: [error messages]}."""
    failed = {}
    for _ in range(12):
        probe, pmap, _, _ = gen.render(model, facts, includes, skip | set(failed))
        gen.write(src, probe)
        r, probs = cc_compile(cc, cc_is_clang, tree, shadow, src, exe, forbidden, label)
        if probs:
            raise Fail("\n".join(probs))
        if r.returncode == 0:
            return failed
        per_fact, unattributed = gen.attribute_errors(r.stderr, src, pmap)
        if unattributed or not per_fact:
            raise Fail("%s: probe does not compile for reasons outside the generated facts "
                       "(the headers themselves?):\n%s" % (label, "\n".join(unattributed[:40])
                                                           or gen.diagnostics_only(r.stderr)))
        for k, v in per_fact.items():
            failed.setdefault(k, []).extend(v)
    raise Fail("%s: probe still does not compile after pruning" % label)


def run_probe(exe, label):
    r = run([exe])
    if r.returncode != 0:
        raise Fail("%s probe exited with %d:\n%s" % (label, r.returncode, gen.diagnostics_only(r.stderr, 3000)))
    out = {}
    for line in r.stdout.splitlines():
        k, _, v = line.partition("\t")
        out[k] = v
    return out, r.stdout


def load_accepted(path):
    """accepted_differences.txt: one "<key>  # <reason>" per line; the key is
    the one printed as "(key: ...)" next to a difference."""
    acc = {}
    if not path:
        return acc
    if not os.path.isfile(path):
        raise Fail("accepted-differences file not found: %s" % path)
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            key, sep, reason = line.partition("#")
            key = " ".join(key.split())
            if not sep or not reason.strip():
                raise Fail("%s:%d: an accepted difference needs a reason after '#': %s"
                           % (path, n, line.rstrip()))
            acc[key] = reason.strip()
    return acc


def describe_kinds(kinds):
    return "/".join(kinds) if kinds else "nothing"


def main(argv=None):
    ap = argparse.ArgumentParser(description="uDAPL header ABI conformance test")
    ap.add_argument("--api", default="2.0", choices=["2.0", "1.2"],
                    help="2.0: dat2/ against libdapl-dev; 1.2: dat/ against illumos's headers")
    ap.add_argument("--ours", help="include root containing our dat2/ (or dat/)")
    ap.add_argument("--oracle", default="/usr/include",
                    help="include root containing the reference headers (libdapl-dev for 2.0)")
    ap.add_argument("--expected", default=None,
                    help="use the oracle's facts recorded in this file instead of --oracle")
    ap.add_argument("--write-expected", default=None,
                    help="read --oracle, record its facts in this file and stop")
    ap.add_argument("--origin", default=None,
                    help="with --write-expected: where the oracle headers came from (recorded)")
    ap.add_argument("--work", required=True, help="scratch directory (build tree)")
    ap.add_argument("--clang", default="clang")
    ap.add_argument("--cc", default="cc", help="C compiler for the probes")
    ap.add_argument("--accept", default=None,
                    help="file of accepted (deliberate) differences; '' for none "
                         "(default: accepted_differences.txt for 2.0, "
                         "accepted_differences_dat12.txt for 1.2)")
    ap.add_argument("--cxx", default=None,
                    help="C++ compiler: also check that every function has C language linkage")
    a = ap.parse_args(argv)
    gen.use_api(a.api)
    if a.accept is None:
        a.accept = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "accepted_differences.txt" if a.api == "2.0"
                                else "accepted_differences_dat12.txt")

    try:
        rep = Report(load_accepted(a.accept))
    except Fail as e:
        print("abi: FAILED: %s" % e)
        return 1
    try:
        result = compare(a, rep)
    except (Fail, gen.GenError) as e:
        for cat, text, key in rep.diffs:
            print("  [%s] %s  (key: %s)" % (cat, text, key))
        print("abi: FAILED: %s" % e)
        print("abi: comparison could not be completed: %d differences" % (len(rep.diffs) + 1))
        return 1
    return result


def linkage_tu(incs, names):
    head = gen.tu_text(incs)
    lineno = head.count("\n")
    lines = []
    lmap = {}
    for n in names:
        lines.append('extern "C" decltype(%s) %s;' % (n, n))
        lineno += 1
        lmap[lineno] = n
    return head + "\n".join(lines) + "\n", lmap


def linkage_compile(cxx, root, shadow, forbid, label, text, gdir):
    src = os.path.join(gdir, "linkage_%s.cpp" % label)
    gen.write(src, text)
    r = run([cxx, "-std=c++17", "-w", "-H", "-I", root, "-I", shadow, "-fsyntax-only", src])
    probs = gen.check_include_hygiene(gen.included_files_from_H(r.stderr),
                                      os.path.join(root, gen.SUBDIR), forbid, label + " C++")
    if probs:
        raise Fail("\n".join(probs))
    return r, src


def oracle_side(a, clang, cc, cxx, work, gdir, forbid_extra):
    """Everything the comparison needs from the oracle headers: their model,
    the generated facts, the probe's output, the expansion of every macro
    that is not a constant, which headers compile on their own. Also checks
    that the generated probe, prototype TU and C++ TU compile against the
    oracle itself."""
    oracle_sub = os.path.join(a.oracle, gen.SUBDIR)
    if not os.path.isfile(os.path.join(oracle_sub, "udat.h")):
        if a.api == "2.0":
            raise Fail("oracle headers not found: %s does not exist. libdapl-dev is not installed "
                       "(apt-get install libdapl-dev); the ABI test needs it as its reference."
                       % os.path.join(oracle_sub, "udat.h"))
        raise Fail("oracle headers not found: %s does not exist" % os.path.join(oracle_sub, "udat.h"))
    oracle_root = os.path.join(work, "oracle")
    if os.path.isdir(oracle_root):
        shutil.rmtree(oracle_root)
    shutil.copytree(oracle_sub, os.path.join(oracle_root, gen.SUBDIR), symlinks=False)
    headers = gen.header_files(os.path.join(oracle_root, gen.SUBDIR))
    shadow_o = make_shadow(os.path.join(work, "shadow_oracle"), headers, "oracle copy")
    forbid_oracle = [gen.realpath(oracle_sub)] + forbid_extra
    otree, omodel, facts = gen.generate(clang, oracle_root, gdir, shadow_o, forbid_oracle)
    includes = omodel["includes"]
    cc_clang = is_clang(cc)

    probe, _, compat, _ = gen.render(omodel, facts, includes)
    probe_o = os.path.join(gdir, "probe_oracle.c")
    gen.write(probe_o, probe)
    r, probs = cc_compile(cc, cc_clang, oracle_root, shadow_o, probe_o,
                          os.path.join(gdir, "probe_oracle"), forbid_oracle, "oracle probe")
    if probs:
        raise Fail("\n".join(probs))
    if r.returncode != 0:
        raise Fail("generated probe does not compile against the oracle itself "
                   "(generator bug):\n%s" % gen.diagnostics_only(r.stderr))
    oout, otext = run_probe(os.path.join(gdir, "probe_oracle"), "oracle")
    gen.write(os.path.join(gdir, "out_oracle.txt"), otext)

    compat_o = os.path.join(gdir, "compat_oracle.c")
    gen.write(compat_o, compat)
    r, probs = cc_compile(cc, cc_clang, oracle_root, shadow_o, compat_o, None, forbid_oracle,
                          "oracle compat", syntax_only=True)
    if probs:
        raise Fail("\n".join(probs))
    if r.returncode != 0:
        raise Fail("generated prototype/type TU does not compile against the oracle itself "
                   "(generator bug):\n%s" % gen.diagnostics_only(r.stderr))

    invocations = {name: gen.macro_invocation(name, d["params"])
                   for name, d in omodel["macros"].items() if d["class"] in ("text", "function")}
    oexp = gen.expand_macros(clang, otree, shadow_o, includes, invocations, gdir)

    if cxx:
        ext = sorted(n for n, f in omodel["functions"].items() if f["storage"] != "static")
        text, _ = linkage_tu(includes, ext)
        r, _ = linkage_compile(cxx, oracle_root, shadow_o, forbid_oracle, "oracle", text, gdir)
        if r.returncode != 0:
            raise Fail("C++ linkage TU does not compile against the oracle (generator bug):\n%s"
                       % gen.diagnostics_only(r.stderr))

    # The facts are made again from the model (gen.make_facts), so the
    # model is recorded instead of the generated code.
    model = {k: v for k, v in omodel.items() if k not in ("all_macros", "record_files")}
    model["macros"] = {n: {k: v for k, v in d.items() if k != "file"}
                       for n, d in omodel["macros"].items()}
    return {
        "api": a.api,
        "headers": headers,
        "model": model,
        "probe": oout,
        "expansions": {n: [invocations[n], oexp.get(n)] for n in sorted(invocations)},
        "standalone": gen.standalone_headers(clang, otree, shadow_o, gdir),
        "origin": a.origin or os.path.abspath(oracle_sub),
    }


def compare(a, rep):
    clang = which(a.clang)
    if not clang:
        raise Fail("clang not found (%r); it is required to read the headers "
                   "(apt-get install clang)" % a.clang)
    cc = which(a.cc)
    if not cc:
        raise Fail("C compiler not found: %r" % a.cc)
    cxx = None
    if a.cxx:
        cxx = which(a.cxx)
        if not cxx:
            raise Fail("C++ compiler not found: %r" % a.cxx)
    work = os.path.abspath(a.work)
    os.makedirs(work, exist_ok=True)
    gdir = os.path.join(work, "gen")
    if os.path.isdir(gdir):
        shutil.rmtree(gdir)
    os.makedirs(gdir)

    if a.write_expected:
        O = oracle_side(a, clang, cc, cxx, work, gdir, [])
        with open(a.write_expected, "w") as f:
            json.dump(O, f, indent=0, sort_keys=True)
            f.write("\n")
        print("abi: %d facts of %s recorded in %s" % (len(gen.make_facts(O["model"]).items),
                                                      O["origin"], a.write_expected))
        return 0

    if not a.ours:
        raise Fail("--ours is required")
    ours_root = os.path.abspath(a.ours)
    ours_sub = os.path.join(ours_root, gen.SUBDIR)
    if not os.path.isdir(ours_sub):
        raise Fail("our headers not found: %s is not a directory" % ours_sub)
    if a.expected:
        with open(a.expected) as f:
            O = json.load(f)
        if O.get("api") != a.api:
            raise Fail("%s records DAT %s facts, not %s" % (a.expected, O.get("api"), a.api))
        forbid_ours = []
        rep.say("abi: oracle facts recorded in %s (from %s%s)" % (
            a.expected, O["origin"],
            "" if not O["model"]["skipped_headers"] else
            "; skipped (not user-space): " + ", ".join(sorted(O["model"]["skipped_headers"]))))
    else:
        oracle_sub = os.path.join(a.oracle, gen.SUBDIR)
        if gen.realpath(ours_sub) == gen.realpath(oracle_sub):
            raise Fail("the include tree under test is the oracle itself (%s)" % ours_sub)
        O = oracle_side(a, clang, cc, cxx, work, gdir, [gen.realpath(ours_root)])
        forbid_ours = [gen.realpath(oracle_sub), gen.realpath(os.path.join(work, "oracle"))]
        rep.say("abi: oracle %s (copied to %s); headers %s%s" % (
            oracle_sub, os.path.join(work, "oracle"), ", ".join(O["model"]["includes"]),
            "" if not O["model"]["skipped_headers"] else
            "; skipped (not user-space): " + ", ".join(sorted(O["model"]["skipped_headers"]))))
    rep.say("abi: under test %s" % ours_sub)
    omodel = O["model"]
    includes = omodel["includes"]
    oracle_headers = O["headers"]
    facts = gen.make_facts(omodel)
    shadow_u = make_shadow(os.path.join(work, "shadow_ours"), oracle_headers, "tested")
    sub = gen.SUBDIR

    # ---------------------------------------------------------------- names
    ours_headers = set(gen.header_files(ours_sub))
    for h in oracle_headers:
        if h not in ours_headers:
            rep.diff("names", "missing header %s/%s" % (sub, h), "header %s/%s" % (sub, h))
    ours_includes = [h for h in includes if h in ours_headers]
    if not ours_includes:
        raise Fail("none of the oracle's headers (%s) exist in %s" % (", ".join(includes), ours_sub))
    utree = gen.Tree(ours_root, "ours")
    umodel = gen.build_model(clang, utree, ours_includes, shadow_u, forbid_ours, gdir)

    onames = omodel["names"]
    unames = dict(umodel["names"])
    umacros = umodel["all_macros"]
    missing = set()
    kind_mismatch = []
    for name in sorted(onames):
        okinds = onames[name]
        ukinds = list(unames.get(name, []))
        if name in umacros and "macro" not in ukinds:
            ukinds.append("macro")
        ukinds = sorted(ukinds)
        if not ukinds:
            missing.add(name)
            continue
        if set(okinds) - set(ukinds):
            kind_mismatch.append((name, okinds, ukinds))
    by_kind = {}
    for name in missing:
        k = describe_kinds(onames[name])
        by_kind.setdefault(k, []).append(name)
    for k in sorted(by_kind):
        for name in sorted(by_kind[k]):
            rep.diff("names", "missing %s %s" % (k, name), "name " + name)
    for name, ok, uk in kind_mismatch:
        rep.diff("names", "%s is %s in the oracle but %s in ours" % (
            name, describe_kinds(ok), describe_kinds(uk)), "name " + name)
    extra = sorted(n for n in unames if n not in onames and not n.startswith("_"))

    def present(n):
        return n in unames or n in umacros

    skip = set(it["id"] for it in facts.items if not all(present(n) for n in it["needs"]))

    # ---------------------------------------------------------------- probe
    cc_clang = is_clang(cc)
    probe_u = os.path.join(gdir, "probe_ours.c")
    oout = O["probe"]
    failed = compile_with_pruning(cc, cc_clang, omodel, facts, ours_includes, ours_root,
                                  shadow_u, forbid_ours, probe_u,
                                  os.path.join(gdir, "probe_ours"), skip, "our probe")
    uout, utext = run_probe(os.path.join(gdir, "probe_ours"), "ours")
    gen.write(os.path.join(gdir, "out_ours.txt"), utext)
    fact_by_id = {it["id"]: it for it in facts.items}
    for fid in sorted(failed):
        msgs = sorted(set(failed[fid]))
        rep.diff(fact_by_id[fid]["cat"], "%s: does not compile against ours: %s"
                 % (fact_by_id[fid]["key"], "; ".join(msgs)[:300]), fact_by_id[fid]["key"])
    for k in oout:
        if k in uout and uout[k] != oout[k]:
            rep.diff("value", "%s: oracle %s, ours %s" % (k, oout[k], uout[k]), k)

    # ---------------------------------------------------------------- compat
    _, _, compat_u, cmap_u = gen.render(omodel, facts, ours_includes, skip)
    compat_up = os.path.join(gdir, "compat_ours.c")
    gen.write(compat_up, compat_u)
    r, probs = cc_compile(cc, cc_clang, ours_root, shadow_u, compat_up, None, forbid_ours,
                          "our compat", syntax_only=True)
    if probs:
        raise Fail("\n".join(probs))
    if r.returncode != 0:
        per_fact, unattributed = gen.attribute_errors(r.stderr, compat_up, cmap_u)
        if unattributed:
            raise Fail("prototype/type TU fails against ours outside the generated facts:\n%s"
                       % "\n".join(unattributed[:40]))
        for fid in sorted(per_fact):
            it = fact_by_id[fid]
            rep.diff(it["cat"], "%s: %s" % (it["key"], "; ".join(sorted(set(per_fact[fid])))[:400]),
                     it["key"])

    # ---------------------------------------------------------------- macros by expansion
    # Macros that are not integer/string constants (function-like macros,
    # empty annotation macros, type aliases, casts, ...) are compared by what
    # a consumer gets: the full preprocessor expansion of M / M(a0, a1, ...)
    # in each tree, as a whitespace-insensitive token string.
    to_expand = {}
    for name in sorted(omodel["macros"]):
        d = omodel["macros"][name]
        if d["class"] not in ("text", "function") or name not in umacros:
            continue
        u = umacros[name]
        if d["class"] == "function":
            if u["params"] is None:
                rep.diff("macro", "macro %s is function-like in the oracle, object-like in ours" % name,
                         "macro " + name)
                continue
            op, up = d["params"], u["params"]
            if len(op) != len(up) or (op and up and op[-1].endswith("...") != up[-1].endswith("...")):
                rep.diff("macro", "macro %s(%s): ours takes (%s)" % (name, ", ".join(op), ", ".join(up)),
                         "macro " + name)
                continue
        elif u["params"] is not None:
            rep.diff("macro", "macro %s is object-like in the oracle, function-like in ours" % name,
                     "macro " + name)
            continue
        to_expand[name] = O["expansions"][name][0]
    uexp = gen.expand_macros(clang, utree, shadow_u, ours_includes, to_expand, gdir)
    for name in sorted(to_expand):
        oexp = O["expansions"][name][1]
        if oexp != uexp.get(name):
            rep.diff("macro", "macro %s: %s expands to `%s` in the oracle, to `%s` in ours"
                     % (name, to_expand[name], oexp, uexp.get(name)), "macro " + name)

    # ---------------------------------------------------------------- functions: linkage
    for name in sorted(omodel["functions"]):
        o = omodel["functions"][name]
        u = umodel["functions"].get(name)
        if u is None:
            continue
        if (o["storage"], o["inline"]) != (u["storage"], u["inline"]):
            rep.diff("function", "function %s: oracle %s%s, ours %s%s" % (
                name, o["storage"], " inline" if o["inline"] else "",
                u["storage"], " inline" if u["inline"] else ""), "function " + name)
        if u["noproto"] and not o["noproto"]:
            rep.diff("function", "function %s is declared without a prototype in ours" % name,
                     "function " + name)

    # ---------------------------------------------------------------- C++ language linkage
    n_linkage = 0
    if cxx:
        ext = sorted(n for n, f in omodel["functions"].items() if f["storage"] != "static")
        text, lmap = linkage_tu(ours_includes, [n for n in ext if n in umodel["functions"]])
        r, src = linkage_compile(cxx, ours_root, shadow_u, forbid_ours, "ours", text, gdir)
        if r.returncode != 0:
            per_fact, unattributed = gen.attribute_errors(r.stderr, src, lmap)
            if unattributed:
                raise Fail("our headers do not compile as C++17:\n%s" % "\n".join(unattributed[:40]))
            for n in sorted(per_fact):
                rep.diff("function", "function %s: not declared extern \"C\" when included from C++: %s"
                         % (n, "; ".join(sorted(set(per_fact[n])))[:300]), "linkage " + n)
        n_linkage = len(ext)

    # ---------------------------------------------------------------- standalone headers
    so = O["standalone"]
    su = gen.standalone_headers(clang, utree, shadow_u, gdir)
    for h in sorted(so):
        if so[h] and h in su and not su[h]:
            rep.diff("header", "%s/%s compiles on its own in the oracle but not in ours" % (sub, h),
                     "standalone %s/%s" % (sub, h))

    # ---------------------------------------------------------------- summary
    c = facts.counts
    n_facts = len(facts.items)
    n_macro_text = sum(1 for d in omodel["macros"].values() if d["class"] in ("text", "function"))
    extra_note = ""
    if extra:
        gen.write(os.path.join(gdir, "extra_names_in_ours.txt"), "\n".join(extra) + "\n")
        extra_note = " (%d names only in ours, listed in %s)" % (
            len(extra), os.path.join(gdir, "extra_names_in_ours.txt"))
    report = []
    for cat, text, key in rep.diffs:
        report.append("  [%s] %s  (key: %s)" % (cat, text, key))
    for cat, text, key, reason in rep.accepted:
        report.append("  [accepted %s] %s  -- %s" % (cat, text, reason))
    for key in sorted(set(rep.accept) - rep.used):
        report.append("  [note] accepted difference not observed (stale entry?): %s" % key)
    gen.write(os.path.join(gdir, "differences.txt"), "\n".join(report) + ("\n" if report else ""))
    for line in report[:MAX_PRINT]:
        print(line)
    if len(report) > MAX_PRINT:
        print("  ... %d more in %s" % (len(report) - MAX_PRINT, os.path.join(gdir, "differences.txt")))
    if missing:
        print("abi: %d oracle names missing in ours: %s" % (len(missing), " ".join(sorted(missing))))
    summary = ("abi: compared %d records, %d fields, %d typedefs, %d enums, %d enum constants, "
               "%d macros, %d functions, %d headers (%d generated facts, %d probe values, "
               "%d macros by expansion, %d names, %d C++ linkage checks): %d differences%s%s" % (
                   c["records"], c["fields"], c["typedefs"], c["enums"], c["enum_consts"],
                   c["macros"], c["functions"], len(oracle_headers), n_facts, len(oout),
                   n_macro_text, len(onames) + len(oracle_headers), n_linkage, len(rep.diffs),
                   (" (+%d accepted, listed in %s)" % (len(rep.accepted), a.accept)
                    if rep.accepted else ""),
                   extra_note))
    print(summary)
    return 1 if rep.diffs else 0


if __name__ == "__main__":
    sys.exit(main())
