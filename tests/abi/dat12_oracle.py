#!/usr/bin/env python3
"""Makes the DAT 1.2 oracle tree from which dat12_expected.json is recorded.

The oracle is illumos-gate's usr/src/lib/udapl/libdat/include/dat/ (the DAT
1.2 headers as illumos ships them): dat.h and dat_redirection.h at
03494a9880d8, dat_error.h, udat.h and the vendor headers at 5f5704245a8a,
the others unchanged since the 2005 import 7c478bd95313. No snapshot of
illumos-gate fits this project's fetch limit, so the tree is rebuilt from
the same headers in OpenSolaris as of 2006 (github.com/andreiw/polaris,
commit deb47cb865d3, path usr/src/lib/udapl/libdat/include/dat/) plus the
four declarations illumos changed since (read from illumos-gate; the rest
of those commits is comments and copyright lines):

  udat.h            DAT_MEM_TYPE_SO_VIRTUAL = 0x03 ends enum dat_mem_type
  dat.h             DAT_MEM_PRIV_RO_DISABLE_FLAG = 0x100 ends enum dat_mem_priv_flags
  dat_error.h       DAT_INVALID_RO_COOKIE ends enum dat_return_subtype
  dat_redirection.h DAT_IA_OPEN_FUNC takes a fifth parameter, boolean_t

    dat12_oracle.py <polaris git dir, or a dir holding its dat/*.h> [<work dir>]

writes <work dir>/oracle12/dat/*.h and records their facts in
dat12_expected.json beside this script (run_abi_test.py --write-expected).
"""

import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ORIGIN = ("illumos-gate usr/src/lib/udapl/libdat/include/dat (03494a9880d8, 5f5704245a8a, "
          "7c478bd95313), rebuilt as polaris deb47cb865d3 + 4 changes (tests/abi/dat12_oracle.py)")

POLARIS_COMMIT = "deb47cb865d3c6165baf2bded9d0f5d25740b2ee"
HEADER_PATH = "usr/src/lib/udapl/libdat/include/dat"

# (file, pattern, replacement): each must match exactly once.
CHANGES = [
    ("udat.h",
     r"(DAT_MEM_TYPE_SHARED_VIRTUAL\s*=\s*0x02)(\s*\}\s*DAT_MEM_TYPE;)",
     r"\1,\n\tDAT_MEM_TYPE_SO_VIRTUAL\t\t= 0x03\2"),
    ("dat.h",
     r"(DAT_MEM_PRIV_ALL_FLAG\s*=\s*0x33)(\s*\}\s*DAT_MEM_PRIV_FLAGS;)",
     r"\1,\n\tDAT_MEM_PRIV_RO_DISABLE_FLAG\t= 0x100\2"),
    ("dat_error.h",
     r"(DAT_THREAD_SAFETY_NOT_FOUND)(\s*\}\s*DAT_RETURN_SUBTYPE;)",
     r"\1,\n\n\tDAT_INVALID_RO_COOKIE\2"),
    ("dat_redirection.h",
     r"(\(\*DAT_IA_OPEN_FUNC\)\([^;]*?OUT\s+DAT_IA_HANDLE \*)\);",
     r"\1,\n\tIN\tboolean_t);"),
]


def read_polaris(src, name):
    if os.path.isdir(os.path.join(src, ".git")) or os.path.isfile(os.path.join(src, "HEAD")):
        git_dir = src if os.path.isfile(os.path.join(src, "HEAD")) else os.path.join(src, ".git")
        return subprocess.run(["git", "--git-dir", git_dir, "show",
                               "%s:%s/%s" % (POLARIS_COMMIT, HEADER_PATH, name)],
                              check=True, stdout=subprocess.PIPE,
                              universal_newlines=True).stdout
    with open(os.path.join(src, name)) as f:
        return f.read()


def main(argv):
    if len(argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    work = argv[2] if len(argv) == 3 else tempfile.mkdtemp(prefix="dat12_oracle.")
    src, out = argv[1], os.path.join(work, "oracle12", "dat")
    os.makedirs(out, exist_ok=True)
    names = ["dat.h", "dat_error.h", "dat_platform_specific.h", "dat_redirection.h",
             "dat_registry.h", "dat_vendor_specific.h", "udat.h", "udat_config.h",
             "udat_redirection.h", "udat_vendor_specific.h"]
    texts = {n: read_polaris(src, n) for n in names}
    for name, pattern, repl in CHANGES:
        new, n = re.subn(pattern, repl, texts[name], flags=re.S)
        if n != 1:
            print("dat12_oracle: %s: %d matches for %s" % (name, n, pattern), file=sys.stderr)
            return 1
        texts[name] = new
    for n, t in texts.items():
        with open(os.path.join(out, n), "w") as f:
            f.write(t)
    print("dat12_oracle: %d headers in %s" % (len(names), out))
    return subprocess.run([sys.executable, os.path.join(HERE, "run_abi_test.py"), "--api", "1.2",
                           "--accept", "", "--oracle", os.path.dirname(out),
                           "--origin", ORIGIN, "--cxx", "c++", "--work", os.path.join(work, "w"),
                           "--write-expected", os.path.join(HERE, "dat12_expected.json")]).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv))
