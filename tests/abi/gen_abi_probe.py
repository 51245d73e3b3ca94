#!/usr/bin/env python3
"""Generate the uDAPL (DAT 2.0) ABI probe from an include tree.

The list of what gets compared is derived from the *oracle* headers at test
time (Debian's libdapl-dev, /usr/include/dat2, copied into the build tree);
nothing is hand-picked.  This module

  * runs ``clang -Xclang -ast-dump=json -fsyntax-only`` and
    ``clang -E -dD`` on a translation unit that includes the dat2 headers,
  * keeps only declarations / macros whose location is inside the given
    include tree's dat2/ directory, and builds a "model" (names with their
    kind, records and their fields, typedefs, enums, functions, macros),
  * writes
      - probe.c   : a C program printing one line per fact, e.g.
                    "sizeof struct dat_event<TAB>120",
                    "offsetof struct dat_event.event_data<TAB>8",
                    "enum DAT_CONNECTION_EVENT_ESTABLISHED<TAB>16386",
                    "macro DAT_SUCCESS<TAB>0"
      - compat.c  : a compile-only TU that re-declares every oracle function
                    with the oracle's own prototype text and static-asserts
                    (__builtin_types_compatible_p) the type of every typedef,
                    record member and variable against the oracle's spelling.
      - manifest.json : fact id -> description, category, needed names.

Every generated fact sits on its own source line and ends with a
``/* F:<id> */`` marker, so the driver (run_abi_test.py) can comment out the
facts whose names are missing in the implementation under test and can map a
compiler diagnostic back to the fact that caused it.

Standard library only.  Used as a module by run_abi_test.py; can also be run
stand-alone:  gen_abi_probe.py --clang clang --include DIR --out OUTDIR
"""

import argparse
import json
import os
import re
import subprocess
import sys

# The header directory under an include root: dat2/ for DAT 2.0, dat/ for
# DAT 1.2 (use_api() switches).
SUBDIR = "dat2"

# Headers a consumer includes; tried in this order.  Every other header of
# the oracle's directory is added when it compiles in user space after
# these (kernel-only headers such as kdat.h are reported and skipped).
BASE_HEADERS = ["udat.h", "dat_registry.h", "dat_ib_extensions.h"]

# The oracle's dat_ib_extensions.h uses struct sockaddr_in6 without including
# <netinet/in.h> (dat_platform_specific.h only includes <sys/socket.h> on
# Linux), so every TU starts with this prelude, for the oracle and for ours.
PRELUDE = ["sys/types.h", "sys/socket.h", "netinet/in.h"]
# Declarations placed after PRELUDE in every TU (see use_api).
PRELUDE_TEXT = ""


def use_api(api):
    """Selects the header set: "2.0" (dat2/) or "1.2" (dat/).  The DAT 1.2
    oracle is illumos's, whose provider table names the Solaris type
    boolean_t; every 1.2 TU declares it as <sys/types.h> does on Solaris, so
    that the oracle compiles on Linux."""
    global SUBDIR, BASE_HEADERS, PRELUDE_TEXT
    if api == "2.0":
        SUBDIR, BASE_HEADERS, PRELUDE_TEXT = "dat2", ["udat.h", "dat_registry.h", "dat_ib_extensions.h"], ""
    elif api == "1.2":
        SUBDIR, BASE_HEADERS = "dat", ["udat.h", "dat_registry.h"]
        PRELUDE_TEXT = "typedef enum { B_FALSE, B_TRUE } boolean_t;\n"
    else:
        raise GenError("unknown DAT API %r" % api)

INT_BUILTINS = {
    "char", "signed char", "unsigned char", "short", "unsigned short",
    "int", "unsigned int", "long", "unsigned long", "long long",
    "unsigned long long", "_Bool", "__int128", "unsigned __int128",
    "wchar_t", "char16_t", "char32_t",
}
FLOAT_BUILTINS = {"float", "double", "long double", "__float128"}

UNSPELLABLE = re.compile(r"\((unnamed|anonymous)\b| at /|::")

TOKEN_RE = re.compile(r"""
    (?P<ws>\s+)
  | (?P<str>(?:u8|[uUL])?"(?:\\.|[^"\\])*")
  | (?P<chr>(?:[uUL])?'(?:\\.|[^'\\])*')
  | (?P<num>\.?[0-9](?:[eEpP][+-]|[A-Za-z0-9_.])*)
  | (?P<id>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<punct>\.\.\.|<<=|>>=|->|\+\+|--|<<|>>|<=|>=|==|!=|&&|\|\||\#\#
              |[*/%+\-&|^]=|[][(){}.&*+\-~!/%<>^|?:;=,\#])
  | (?P<other>.)
""", re.X | re.S)


class GenError(Exception):
    """A problem that makes the comparison impossible (reported, test fails)."""


# --------------------------------------------------------------------------
# small helpers

def tokenize(text):
    out = []
    for m in TOKEN_RE.finditer(text):
        if m.lastgroup == "ws":
            continue
        out.append((m.lastgroup, m.group(0)))
    return out


def norm_tokens(text, params=None):
    """Whitespace-insensitive token form of a macro body; function-like macro
    parameters are replaced by their position so renaming them is no
    difference."""
    pmap = {}
    if params:
        for i, p in enumerate(params):
            if p != "...":
                pmap[p] = "@%d" % i
    toks = []
    for kind, tok in tokenize(text):
        if kind == "id" and tok in pmap:
            tok = pmap[tok]
        toks.append(tok)
    return " ".join(toks)


def fix_type_text(text):
    """clang prints a va_list parameter as its decayed builtin type; spelling
    that as "struct __va_list_tag *" would declare a new tag, so use the
    builtin array type, which decays to the same pointer in a parameter."""
    return re.sub(r"\bstruct __va_list_tag \*", "__builtin_va_list", text)


def realpath(p):
    return os.path.realpath(p)


def under(path, root):
    path = realpath(path)
    root = realpath(root)
    return path == root or path.startswith(root.rstrip("/") + "/")


def c_str(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, **kw)


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def tu_text(includes, extra=""):
    lines = ["/* generated by gen_abi_probe.py -- do not edit */"]
    lines += ["#include <%s>" % h for h in PRELUDE]
    text = "\n".join(lines) + "\n" + PRELUDE_TEXT
    return text + "\n".join("#include <%s/%s>" % (SUBDIR, h) for h in includes) + "\n" + extra


def header_files(dat2_dir):
    if not os.path.isdir(dat2_dir):
        return []
    return sorted(f for f in os.listdir(dat2_dir)
                  if f.endswith(".h") and os.path.isfile(os.path.join(dat2_dir, f)))


# --------------------------------------------------------------------------
# include-path hygiene:  "-H" output / "# line" markers must only name dat2
# headers of the intended tree

def included_files_from_H(stderr):
    files = []
    for line in stderr.splitlines():
        m = re.match(r"^\.+ (.+)$", line)
        if m:
            files.append(m.group(1).strip())
    return files


def diagnostics_only(stderr, limit=6000):
    """stderr without the "-H" include listing."""
    out = []
    skipping = False
    for line in stderr.splitlines():
        if re.match(r"^\.+ ", line):
            continue
        if line.startswith("Multiple include guards may be useful for:"):
            skipping = True
            continue
        if skipping and line.startswith("/"):
            continue
        skipping = False
        out.append(line)
    text = "\n".join(out)
    return text if len(text) <= limit else "...\n" + text[-limit:]


def check_include_hygiene(files, allowed_root, forbidden_roots, what):
    """Returns a list of problems (strings)."""
    problems = []
    seen = set()
    for f in files:
        if f in seen:
            continue
        seen.add(f)
        rp = realpath(f)
        for fr in forbidden_roots:
            if fr and under(rp, fr):
                problems.append("%s: used %s (inside forbidden tree %s)" % (what, f, fr))
        if re.search(r"(^|/)%s/[^/]+$" % SUBDIR, f) and not under(rp, allowed_root):
            problems.append("%s: used %s, which is not under %s" % (what, f, allowed_root))
    return problems


# --------------------------------------------------------------------------
# compiler diagnostics -> fact lines

DIAG_RE = re.compile(r"^(.*?):(\d+):(?:\d+:)? (fatal error|error|warning|note): (.*)$")


def diagnostic_blocks(stderr):
    blocks = []
    cur = None
    for line in stderr.splitlines():
        m = DIAG_RE.match(line)
        if not m:
            continue
        path, lineno, sev, msg = m.group(1), int(m.group(2)), m.group(3), m.group(4)
        if sev in ("error", "fatal error", "warning"):
            cur = {"sev": sev, "msg": msg, "locs": [(path, lineno)], "text": line}
            blocks.append(cur)
        elif cur is not None:
            cur["locs"].append((path, lineno))
    return [b for b in blocks if b["sev"] != "warning"]


def attribute_errors(stderr, src_path, line_to_fact):
    """Map compiler errors to facts.  Returns (per_fact {id: [msg]},
    unattributed [text])."""
    per_fact = {}
    unattributed = []
    src_base = os.path.basename(src_path)
    for b in diagnostic_blocks(stderr):
        fid = None
        for path, lineno in b["locs"]:
            if os.path.basename(path) == src_base and lineno in line_to_fact:
                fid = line_to_fact[lineno]
                break
        if fid is None:
            unattributed.append(b["text"])
        else:
            per_fact.setdefault(fid, []).append(b["msg"])
    return per_fact, unattributed


# --------------------------------------------------------------------------
# clang AST (JSON) walking

class LocTracker:
    """clang's JSON dump only writes "file" when it changes, in document
    order; replay that to know the file of every node."""

    def __init__(self):
        self.file = None

    def _bare(self, loc):
        if not isinstance(loc, dict):
            return
        if "spellingLoc" in loc or "expansionLoc" in loc:
            self._bare(loc.get("spellingLoc"))
            self._bare(loc.get("expansionLoc"))
            return
        if "file" in loc:
            self.file = loc["file"]

    def node_file(self, node):
        f = None
        for k, v in node.items():
            if k == "loc":
                self._bare(v)
                f = self.file
            elif k == "range" and isinstance(v, dict):
                self._bare(v.get("begin"))
                self._bare(v.get("end"))
        return f


def parse_ast(ast, dat2_dir):
    """Returns (top-level decl nodes located under dat2_dir, all nodes
    by id, complete-tag set over the whole TU)."""
    tracker = LocTracker()
    selected = []
    by_id = {}
    complete_tags = set()

    def walk(n, depth):
        f = tracker.node_file(n)
        if "id" in n:
            by_id.setdefault(n["id"], n)
        if n.get("kind") == "RecordDecl" and n.get("completeDefinition") and n.get("name"):
            complete_tags.add("%s %s" % (n.get("tagUsed", "struct"), n["name"]))
        if depth == 1 and f and under(f, dat2_dir) and not n.get("isImplicit"):
            selected.append((n, f))
        for c in n.get("inner", []) or []:
            walk(c, depth + 1)

    walk(ast, 0)
    return selected, by_id, complete_tags


def type_class(tnode, by_id, complete_tags):
    """Classify a JSON type node: returns (kind, complete) with kind in
    int/float/pointer/record/array/function/void/other."""
    k = tnode.get("kind")
    inner = tnode.get("inner") or []
    qt = tnode.get("type", {}).get("qualType", "")
    if k == "BuiltinType":
        if qt == "void":
            return "void", False
        if qt in INT_BUILTINS:
            return "int", True
        if qt in FLOAT_BUILTINS:
            return "float", True
        return "other", True
    if k in ("PointerType", "BlockPointerType"):
        return "pointer", True
    if k in ("TypedefType", "ElaboratedType", "ParenType", "QualType",
             "AttributedType", "MacroQualifiedType", "TypeOfType", "TypeOfExprType",
             "DecayedType", "AdjustedType"):
        if inner:
            return type_class(inner[0], by_id, complete_tags)
        return "other", False
    if k == "EnumType":
        return "int", True
    if k == "RecordType":
        decl = tnode.get("decl", {})
        name = decl.get("name")
        if name:
            tag = qt.split()[0] if qt.split() and qt.split()[0] in ("struct", "union") else "struct"
            return "record", ("%s %s" % (tag, name)) in complete_tags
        d = by_id.get(decl.get("id"), {})
        return "record", bool(d.get("completeDefinition"))
    if k == "ConstantArrayType":
        if inner:
            _, comp = type_class(inner[0], by_id, complete_tags)
            return "array", comp
        return "array", False
    if k in ("IncompleteArrayType", "VariableArrayType"):
        return "array", False
    if k in ("FunctionProtoType", "FunctionNoProtoType"):
        return "function", False
    return "other", False


def field_entries(rec, prefix, by_id):
    """Yields field dicts for a RecordDecl, descending into anonymous
    members and into fields whose type is an unnamed record."""
    last_anon = None
    for c in rec.get("inner", []) or []:
        kind = c.get("kind")
        if kind == "RecordDecl":
            if not c.get("name"):
                last_anon = c
            continue
        if kind != "FieldDecl":
            continue
        name = c.get("name")
        qt = fix_type_text(c.get("type", {}).get("qualType", ""))
        anon_type = bool(UNSPELLABLE.search(qt))
        sub = last_anon if anon_type else None
        if not name:
            # C11 anonymous struct/union member: its fields are accessed
            # directly through the enclosing record.
            if sub is not None:
                for e in field_entries(sub, prefix, by_id):
                    yield e
            continue
        yield {
            "path": prefix + name,
            "type": qt,
            "bitfield": bool(c.get("isBitfield")),
            "spellable": not anon_type,
        }
        if sub is not None:
            for e in field_entries(sub, prefix + name + ".", by_id):
                yield e


def extract_decls(ast, dat2_dir):
    selected, by_id, complete_tags = parse_ast(ast, dat2_dir)
    m = {
        "names": {},        # name -> sorted list of kinds
        "typedefs": {},     # name -> info
        "records": {},      # spelling -> info
        "enums": {},        # "enum tag" -> info
        "enum_consts": {},  # name -> enum spelling or None
        "functions": {},    # name -> info
        "vars": {},         # name -> info
        "record_files": {},
    }
    names = {}

    def add_name(kind, name):
        names.setdefault(name, set()).add(kind)

    rec_by_id = {}
    tag_rec = {}

    def visit_record(n, fname):
        tag = n.get("tagUsed", "struct")
        name = n.get("name")
        if name:
            add_name(tag, "%s %s" % (tag, name))
            key = "%s %s" % (tag, name)
            if n.get("completeDefinition") or key not in tag_rec:
                tag_rec[key] = n
        if n.get("completeDefinition"):
            rec_by_id[n["id"]] = n
        # tags declared inside a record are file-scope tags in C
        for c in n.get("inner", []) or []:
            if c.get("kind") == "RecordDecl":
                visit_record(c, fname)
            elif c.get("kind") == "EnumDecl":
                visit_enum(c)

    def visit_enum(n):
        name = n.get("name")
        spell = ("enum %s" % name) if name else None
        if name:
            add_name("enum", spell)
            m["enums"].setdefault(spell, {"spell": spell})
        for c in n.get("inner", []) or []:
            if c.get("kind") == "EnumConstantDecl":
                add_name("enumconst", c["name"])
                m["enum_consts"][c["name"]] = spell

    typedef_nodes = []
    for n, fname in selected:
        k = n.get("kind")
        if k == "RecordDecl":
            visit_record(n, fname)
        elif k == "EnumDecl":
            visit_enum(n)
        elif k == "TypedefDecl":
            typedef_nodes.append(n)
        elif k == "FunctionDecl":
            add_name("function", n["name"])
            qt = fix_type_text(n.get("type", {}).get("qualType", ""))
            m["functions"][n["name"]] = {
                "type": qt,
                "storage": n.get("storageClass", "extern"),
                "inline": bool(n.get("inline")),
                "variadic": qt.rstrip().endswith("...)"),
                "noproto": qt.rstrip().endswith("()"),
                "spellable": not UNSPELLABLE.search(qt),
            }
        elif k == "VarDecl":
            add_name("var", n["name"])
            qt = fix_type_text(n.get("type", {}).get("qualType", ""))
            m["vars"][n["name"]] = {"type": qt, "spellable": not UNSPELLABLE.search(qt)}

    # records with a tag
    for key, n in tag_rec.items():
        if n.get("completeDefinition"):
            m["records"][key] = {
                "spell": key,
                "fields": list(field_entries(n, "", by_id)),
            }

    for n in typedef_nodes:
        name = n["name"]
        add_name("typedef", name)
        tnode = (n.get("inner") or [{}])[0]
        kind, complete = type_class(tnode, by_id, complete_tags)
        qt = fix_type_text(n.get("type", {}).get("qualType", ""))
        info = {"type": qt, "kind": kind, "complete": complete,
                "spellable": not UNSPELLABLE.search(qt)}
        m["typedefs"][name] = info
        # typedef of an unnamed record: the typedef name is the record's only spelling
        t = tnode
        while t.get("kind") in ("ElaboratedType", "ParenType") and t.get("inner"):
            t = t["inner"][0]
        if t.get("kind") == "RecordType":
            decl = t.get("decl", {})
            rec = rec_by_id.get(decl.get("id"))
            if rec is None:
                owned = tnode.get("ownedTagDecl", {})
                rec = rec_by_id.get(owned.get("id"))
            if rec is not None and not rec.get("name"):
                m["records"][name] = {"spell": name,
                                      "fields": list(field_entries(rec, "", by_id))}
                # clang prints such a type as "struct NAME", which is not a
                # valid spelling in C
                info["spellable"] = False

    # field names take part in the name comparison
    for spell, r in m["records"].items():
        for f in r["fields"]:
            add_name("field", "%s.%s" % (spell, f["path"]))

    m["names"] = {k: sorted(v) for k, v in names.items()}
    return m


# --------------------------------------------------------------------------
# macros (clang -E -dD keeps the definitions in place, with line markers)

def extract_macros(dd_text, dat2_dir):
    cur = None
    defs = {}
    for line in dd_text.splitlines():
        mm = re.match(r'^# \d+ "((?:\\.|[^"\\])*)"', line)
        if mm:
            cur = mm.group(1)
            continue
        mm = re.match(r"^#define ([A-Za-z_]\w*)(\(([^)]*)\))?(?: (.*))?$", line)
        if mm:
            name = mm.group(1)
            params = None
            if mm.group(2) is not None:
                params = [p.strip() for p in mm.group(3).split(",") if p.strip()]
            body = mm.group(4) or ""
            defs[name] = {"params": params, "body": body, "file": cur}
            continue
        mm = re.match(r"^#undef ([A-Za-z_]\w*)", line)
        if mm:
            defs.pop(mm.group(1), None)
    own = {}
    for name, d in defs.items():
        f = d["file"]
        if f and not f.startswith("<") and under(f, dat2_dir):
            own[name] = d
    for d in list(defs.values()):
        d["norm"] = norm_tokens(d["body"], d["params"])
    return own, defs


def macro_invocation(name, params):
    """How a consumer uses the macro: M, or M(abi_a0, ...) with two extra
    arguments for a variadic one."""
    if params is None:
        return name
    args = []
    for i, p in enumerate(params):
        if p == "..." or p.endswith("..."):
            args += ["abi_va0", "abi_va1"]
        else:
            args.append("abi_a%d" % i)
    return "%s(%s)" % (name, ", ".join(args))


def expand_macros(clang, tree, shadow, includes, invocations, workdir):
    """Fully expands each invocation with the preprocessor in the context of
    the headers; returns {name: normalized token string}."""
    lines = []
    order = sorted(invocations)
    for i, name in enumerate(order):
        lines.append("abi_mb_%d %s abi_me_%d" % (i, invocations[name], i))
    src = os.path.join(workdir, "expand_%s.c" % tree.label)
    write(src, tu_text(includes, "\n".join(lines) + "\n"))
    r = run(clang_cmd(clang, tree, shadow, ["-E", "-P", src]))
    if r.returncode != 0:
        raise GenError("%s: expanding macros failed:\n%s" % (tree.label, diagnostics_only(r.stderr)))
    out = {}
    for m in re.finditer(r"\babi_mb_(\d+)\b(.*?)\babi_me_\1\b", r.stdout, re.S):
        out[order[int(m.group(1))]] = norm_tokens(m.group(2))
    return out


# --------------------------------------------------------------------------

class Tree:
    """One include tree (root containing dat2/ or dat/)."""

    def __init__(self, root, label):
        self.root = os.path.abspath(root)
        self.dat2 = os.path.join(self.root, SUBDIR)
        self.label = label


def clang_cmd(clang, tree, shadow, extra):
    cmd = [clang, "-std=gnu11", "-I", tree.root]
    if shadow:
        cmd += ["-I", shadow]
    return cmd + extra


def select_headers(clang, tree, shadow, forbidden, workdir):
    """BASE_HEADERS plus every other header of the tree that compiles in
    user space after them.  Returns (includes, skipped{name: reason})."""
    files = header_files(tree.dat2)
    base = [h for h in BASE_HEADERS if h in files]
    if not base:
        raise GenError("%s: none of %s found in %s" % (tree.label, BASE_HEADERS, tree.dat2))
    src = os.path.join(workdir, "select_%s.c" % tree.label)
    write(src, tu_text(base))
    r = run(clang_cmd(clang, tree, shadow, ["-fsyntax-only", "-H", src]))
    if r.returncode != 0:
        raise GenError("%s headers do not compile with clang:\n%s" % (tree.label.replace("ours", "our"), diagnostics_only(r.stderr)))
    probs = check_include_hygiene(included_files_from_H(r.stderr), tree.dat2, forbidden, tree.label)
    if probs:
        raise GenError("\n".join(probs))
    used = set(os.path.basename(f) for f in included_files_from_H(r.stderr)
               if under(f, tree.dat2))
    includes = list(base)
    skipped = {}
    for h in files:
        if h in used or h in includes:
            continue
        write(src, tu_text(includes + [h]))
        r = run(clang_cmd(clang, tree, shadow, ["-fsyntax-only", src]))
        if r.returncode == 0:
            includes.append(h)
        else:
            first = [l for l in r.stderr.splitlines() if "error" in l][:1]
            skipped[h] = first[0] if first else "does not compile"
    return includes, skipped


def standalone_headers(clang, tree, shadow, workdir):
    """Which headers compile when included on their own (no prelude)."""
    res = {}
    src = os.path.join(workdir, "standalone_%s.c" % tree.label)
    for h in header_files(tree.dat2):
        write(src, PRELUDE_TEXT + "#include <%s/%s>\n" % (SUBDIR, h))
        r = run(clang_cmd(clang, tree, shadow, ["-fsyntax-only", src]))
        res[h] = (r.returncode == 0)
    return res


def build_model(clang, tree, includes, shadow, forbidden, workdir):
    """clang AST + macro dump of the TU including `includes` from `tree`."""
    src = os.path.join(workdir, "tu_%s.c" % tree.label)
    write(src, tu_text(includes))
    r = run(clang_cmd(clang, tree, shadow,
                      ["-Xclang", "-ast-dump=json", "-fsyntax-only", "-H", src]))
    if r.returncode != 0:
        raise GenError("%s headers do not compile with clang (AST dump):\n%s"
                       % (tree.label.replace("ours", "our"), diagnostics_only(r.stderr)))
    probs = check_include_hygiene(included_files_from_H(r.stderr), tree.dat2, forbidden, tree.label)
    if probs:
        raise GenError("\n".join(probs))
    try:
        ast = json.loads(r.stdout)
    except ValueError as e:
        raise GenError("cannot parse clang JSON AST: %s" % e)
    model = extract_decls(ast, tree.dat2)

    r = run(clang_cmd(clang, tree, shadow, ["-E", "-dD", src]))
    if r.returncode != 0:
        raise GenError("%s: clang -E -dD failed:\n%s" % (tree.label, diagnostics_only(r.stderr)))
    markers = re.findall(r'^# \d+ "([^"]*)"', r.stdout, re.M)
    probs = check_include_hygiene([f for f in set(markers) if not f.startswith("<")],
                                  tree.dat2, forbidden, tree.label + " (clang -E)")
    if probs:
        raise GenError("\n".join(probs))
    own, alldefs = extract_macros(r.stdout, tree.dat2)
    r2 = run(clang_cmd(clang, tree, shadow, ["-E", "-dM", src]))
    final = set(re.findall(r"^#define ([A-Za-z_]\w*)", r2.stdout, re.M))
    model["macros"] = {k: v for k, v in own.items() if k in final}
    model["all_macros"] = {k: {"params": v["params"], "norm": v["norm"]}
                           for k, v in alldefs.items() if k in final}
    for k in model["macros"]:
        model["names"].setdefault(k, [])
        if "macro" not in model["names"][k]:
            model["names"][k] = sorted(model["names"][k] + ["macro"])
    model["includes"] = includes
    model["headers"] = header_files(tree.dat2)
    return model


def classify_macros(clang, tree, model, shadow, workdir):
    """Object-like macros: 'int' if the expansion is an integer constant
    expression (usable as a case label), 'string' if it is only string
    literals, otherwise 'text' (compared as normalized tokens).
    Function-like macros: 'function' (arity + normalized body)."""
    obj = sorted(k for k, v in model["macros"].items() if v["params"] is None)
    body_lines = []
    line_to_name = {}
    head = tu_text(model["includes"])
    start = head.count("\n") + 1
    for i, name in enumerate(obj):
        d = model["macros"][name]
        if not d["body"].strip():
            continue
        body_lines.append(
            "void abi_ice_%d(void) { switch ((__typeof__((%s)))0) { case (%s): break; default: break; } }"
            % (i, name, name))
        line_to_name[start + len(body_lines) - 1] = name
        body_lines.append("static const char abi_str_%d[] = %s;" % (i, name))
        line_to_name[start + len(body_lines) - 1] = "str:" + name
    src = os.path.join(workdir, "classify_%s.c" % tree.label)
    write(src, head + "\n".join(body_lines) + "\n")
    r = run(clang_cmd(clang, tree, shadow, ["-fsyntax-only", "-ferror-limit=0", "-w", src]))
    bad, unattributed = attribute_errors(r.stderr, src, line_to_name)
    if unattributed:
        raise GenError("macro classification: unexpected errors:\n" + "\n".join(unattributed[:20]))
    for name, d in model["macros"].items():
        if d["params"] is not None:
            d["class"] = "function"
            continue
        toks = tokenize(d["body"])
        if not toks:
            d["class"] = "text"
        elif name not in bad:
            d["class"] = "int"
        elif "str:" + name not in bad:
            d["class"] = "string"
        else:
            d["class"] = "text"


# --------------------------------------------------------------------------
# fact generation

class Facts:
    def __init__(self):
        self.items = []   # dicts: id, cat, key, code(probe) or ccode(compat), needs
        self.counts = {}

    def add(self, cat, key, needs, probe=None, compat=None):
        fid = len(self.items)
        self.items.append({"id": fid, "cat": cat, "key": key, "needs": sorted(set(needs)),
                           "probe": probe, "compat": compat})
        return fid


def type_names(text, oracle_names):
    """Oracle names referenced by a type spelling (typedefs and tags)."""
    needs = []
    toks = [t for k, t in tokenize(text)]
    for i, t in enumerate(toks):
        if t in ("struct", "union", "enum") and i + 1 < len(toks):
            nm = "%s %s" % (t, toks[i + 1])
            if nm in oracle_names:
                needs.append(nm)
        elif t in oracle_names and "typedef" in oracle_names[t]:
            needs.append(t)
    return needs


def make_facts(model):
    F = Facts()
    names = model["names"]
    cnt = {"records": 0, "fields": 0, "typedefs": 0, "enums": 0, "enum_consts": 0,
           "macros": 0, "functions": 0, "vars": 0}

    # records
    for spell in sorted(model["records"]):
        r = model["records"][spell]
        cnt["records"] += 1
        F.add("record", "sizeof " + spell, [spell],
              probe='abi_p("sizeof %s", (long long)sizeof(%s));' % (spell, spell))
        F.add("record", "alignof " + spell, [spell],
              probe='abi_p("alignof %s", (long long)__alignof__(%s));' % (spell, spell))
        for f in r["fields"]:
            cnt["fields"] += 1
            fk = "%s.%s" % (spell, f["path"])
            needs = [spell, fk]
            acc = "((%s *)0)->%s" % (spell, f["path"])
            if f["bitfield"]:
                F.add("field", "bitfield " + fk, needs,
                      probe=('{ %s abi_v; memset(&abi_v, 0, sizeof abi_v); abi_v.%s = -1; '
                             'abi_b("bitfield %s", &abi_v, sizeof abi_v, abi_v.%s < 0); }'
                             % (spell, f["path"], fk, f["path"])))
                continue
            F.add("field", "offsetof " + fk, needs,
                  probe='abi_p("offsetof %s", (long long)offsetof(%s, %s));' % (fk, spell, f["path"]))
            F.add("field", "sizeof " + fk, needs,
                  probe='abi_p("sizeof %s", (long long)sizeof(%s));' % (fk, acc))
            F.add("field", "alignof " + fk, needs,
                  probe='abi_p("alignof %s", (long long)__alignof__(%s));' % (fk, acc))
            if f["spellable"]:
                F.add("field", "type " + fk, needs + type_names(f["type"], names),
                      compat=('_Static_assert(__builtin_types_compatible_p(__typeof__(&%s), '
                              '__typeof__(%s) *), %s);' % (acc, f["type"],
                                                           c_str("type of %s is not %s" % (fk, f["type"])))))

    # typedefs
    for name in sorted(model["typedefs"]):
        t = model["typedefs"][name]
        cnt["typedefs"] += 1
        needs = [name]
        if t["complete"] and t["kind"] not in ("function", "void") and name not in model["records"]:
            F.add("typedef", "sizeof " + name, needs,
                  probe='abi_p("sizeof %s", (long long)sizeof(%s));' % (name, name))
            F.add("typedef", "alignof " + name, needs,
                  probe='abi_p("alignof %s", (long long)__alignof__(%s));' % (name, name))
        if t["kind"] == "int":
            F.add("typedef", "signed " + name, needs,
                  probe='abi_p("signed %s", (long long)((%s)-1 < (%s)0));' % (name, name, name))
        if t["kind"] in ("int", "pointer", "float"):
            F.add("typedef", "class " + name, needs,
                  probe='abi_p("class %s", (long long)__builtin_classify_type((%s)0));' % (name, name))
        if t["spellable"]:
            F.add("typedef", "type " + name, needs + type_names(t["type"], names),
                  compat=('_Static_assert(__builtin_types_compatible_p(%s *, __typeof__(%s) *), %s);'
                          % (name, t["type"], c_str("typedef %s is not %s" % (name, t["type"])))))

    # enums
    for spell in sorted(model["enums"]):
        cnt["enums"] += 1
        F.add("enum", "sizeof " + spell, [spell],
              probe='abi_p("sizeof %s", (long long)sizeof(%s));' % (spell, spell))
        F.add("enum", "signed " + spell, [spell],
              probe='abi_p("signed %s", (long long)((%s)-1 < 0));' % (spell, spell))
    for name in sorted(model["enum_consts"]):
        cnt["enum_consts"] += 1
        F.add("enumconst", "enum " + name, [name],
              probe='ABI_V("enum %s", (%s));' % (name, name))

    # functions / variables
    for name in sorted(model["functions"]):
        fn = model["functions"][name]
        cnt["functions"] += 1
        if fn["spellable"]:
            F.add("function", "prototype " + name, [name] + type_names(fn["type"], names),
                  compat="extern __typeof__(%s) %s;" % (fn["type"], name))
    for name in sorted(model["vars"]):
        v = model["vars"][name]
        cnt["vars"] += 1
        F.add("var", "sizeof " + name, [name],
              probe='abi_p("sizeof %s", (long long)sizeof(%s));' % (name, name))
        if v["spellable"]:
            F.add("var", "type " + name, [name] + type_names(v["type"], names),
                  compat="extern __typeof__(%s) %s;" % (v["type"], name))

    # macros
    for name in sorted(model["macros"]):
        d = model["macros"][name]
        cnt["macros"] += 1
        cls = d["class"]
        if cls == "int":
            F.add("macro", "macro " + name, [name],
                  probe=('{ switch ((__typeof__((%s)))0) { case (%s): break; default: break; } '
                         'ABI_V("macro %s", (%s)); abi_p("macro-size %s", (long long)sizeof((%s))); '
                         'abi_p("macro-signed %s", (long long)((__typeof__((%s)))-1 < 0)); }'
                         % (name, name, name, name, name, name, name, name)))
        elif cls == "string":
            F.add("macro", "macro " + name, [name],
                  probe='abi_s("macro %s", %s, sizeof(%s));' % (name, name, name))
        # 'text' and 'function' macros are compared in python (token form)
    F.counts = cnt
    return F


PROBE_HEAD = r'''
#include <stdio.h>
#include <stddef.h>
#include <string.h>
static void abi_p(const char *k, long long v) { printf("%s\t%lld\n", k, v); }
static void abi_u(const char *k, unsigned long long v) { printf("%s\t%llu\n", k, v); }
static void abi_s(const char *k, const char *s, size_t n)
{
    size_t i;
    printf("%s\t\"", k);
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') putchar(c);
        else printf("\\x%02x", c);
    }
    printf("\"\n");
}
static void abi_b(const char *k, const void *p, size_t n, int neg)
{
    size_t i;
    printf("%s\t", k);
    for (i = 0; i < n; i++) printf("%02x", ((const unsigned char *)p)[i]);
    printf(" signed=%d\n", neg);
}
#define ABI_V(k, e) (((e) < 0) ? abi_p((k), (long long)(e)) : abi_u((k), (unsigned long long)(e)))
'''


def render(model, facts, includes, skip_ids=frozenset()):
    """Returns (probe_text, probe_line_map, compat_text, compat_line_map).
    Facts in skip_ids are emitted as comments (line numbers stay stable)."""
    head = tu_text(includes)
    probe = [head + PROBE_HEAD.strip("\n"), "int main(void)", "{"]
    pmap = {}
    cur = "\n".join(probe).count("\n") + 2
    for it in facts.items:
        if it["probe"] is None:
            continue
        if it["id"] in skip_ids:
            probe.append("    /* skipped F:%d */" % it["id"])
        else:
            probe.append("    %s /* F:%d */" % (it["probe"], it["id"]))
            pmap[cur] = it["id"]
        cur += 1
    probe += ["    return 0;", "}", ""]
    compat = [head.rstrip("\n")]
    cmap = {}
    cur = head.count("\n") + 1
    for it in facts.items:
        if it["compat"] is None:
            continue
        if it["id"] in skip_ids:
            compat.append("/* skipped F:%d */" % it["id"])
        else:
            compat.append("%s /* F:%d */" % (it["compat"], it["id"]))
            cmap[cur] = it["id"]
        cur += 1
    compat.append("int abi_compat_nonempty_tu;")
    return "\n".join(probe), pmap, "\n".join(compat) + "\n", cmap


def generate(clang, include_root, out_dir, shadow=None, forbidden=()):
    os.makedirs(out_dir, exist_ok=True)
    tree = Tree(include_root, "oracle")
    includes, skipped = select_headers(clang, tree, shadow, forbidden, out_dir)
    model = build_model(clang, tree, includes, shadow, forbidden, out_dir)
    classify_macros(clang, tree, model, shadow, out_dir)
    model["skipped_headers"] = skipped
    facts = make_facts(model)
    probe, pmap, compat, cmap = render(model, facts, includes)
    write(os.path.join(out_dir, "probe.c"), probe)
    write(os.path.join(out_dir, "compat.c"), compat)
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump({"includes": includes, "skipped_headers": skipped, "counts": facts.counts,
                   "facts": facts.items}, f, indent=1)
    with open(os.path.join(out_dir, "model_oracle.json"), "w") as f:
        json.dump(model, f, indent=1, sort_keys=True)
    return tree, model, facts


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clang", default="clang")
    ap.add_argument("--include", required=True,
                    help="include root containing dat2/ (the oracle copy)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    try:
        _, _, facts = generate(a.clang, a.include, a.out)
    except GenError as e:
        print("gen_abi_probe: %s" % e, file=sys.stderr)
        return 1
    print("gen_abi_probe: %d facts %s -> %s" % (len(facts.items), json.dumps(facts.counts), a.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
