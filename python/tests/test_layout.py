"""The ctypes mirrors of ferrox._lib against ferrox.h: field names (parsed
from the header), every field's offset and each struct's size (a C program
compiled now against the header, printing sizeof and offsetof), so a
header change the bindings miss fails here. The header is the one bundled
in the installed package (the one its libferrox.so was built with), or
the repository's when running from a source tree."""
import ctypes
import os
import re
import shutil
import subprocess

import pytest

from ferrox import _lib

from conftest import REQUIRE, ROOT


def header():
    bundled = os.path.join(os.path.dirname(os.path.abspath(_lib.__file__)), "include", "ferrox.h")
    return bundled if os.path.isfile(bundled) else os.path.join(ROOT, "include", "ferrox.h")


def c_fields(src, name):
    """Field names of `struct name { ... };` in the header, in order."""
    src = re.sub(r"/\*.*?\*/", "", src, flags=re.S)
    m = re.search(r"\bstruct\s+%s\s*\{(.*?)\};" % name, src, re.S)
    assert m, "struct %s not in ferrox.h" % name
    names = []
    for decl in m.group(1).split(";"):
        decl = decl.strip()
        if not decl:
            continue
        # a function pointer: "bool (*progress)(float p, void *arg)"
        fn = re.search(r"\(\s*\*\s*(\w+)\s*\)\s*\(", decl)
        if fn:
            names.append(fn.group(1))
            continue
        # "size_t off, len" / "char msg[512]" / "const fx_token *tokens"
        head, *rest = decl.split(",")
        for d in [head] + rest:
            names.append(re.search(r"(\w+)\s*(\[[^\]]*\])?\s*$", d.strip()).group(1))
    return names


def test_field_names_match_header():
    with open(header()) as f:
        src = f.read()
    for cname, py in _lib.STRUCTS.items():
        assert [f[0] for f in py._fields_] == c_fields(src, cname), cname


def test_sizes_and_offsets_match_c():
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        if REQUIRE:
            pytest.fail("no C compiler (FX_REQUIRE_MODELS=1)")
        pytest.skip("no C compiler")
    lines = ['#include <stddef.h>', '#include <stdio.h>', '#include "ferrox.h"', "int main(void) {"]
    for cname, py in _lib.STRUCTS.items():
        lines.append('printf("%s sizeof %%zu\\n", sizeof(struct %s));' % (cname, cname))
        for fname, _ in py._fields_:
            lines.append('printf("%s %s %%zu\\n", offsetof(struct %s, %s));' % (cname, fname, cname, fname))
    lines += ["return 0;", "}"]
    tmp = os.environ.get("TMPDIR", "/tmp")
    d = __import__("tempfile").mkdtemp(dir=tmp)
    try:
        with open(os.path.join(d, "layout.c"), "w") as f:
            f.write("\n".join(lines) + "\n")
        exe = os.path.join(d, "layout")
        subprocess.run([cc, "-std=c11", "-I", os.path.dirname(header()), "-o", exe, os.path.join(d, "layout.c")],
                       check=True)
        out = subprocess.run([exe], check=True, capture_output=True, text=True).stdout
    finally:
        shutil.rmtree(d)
    want = {}
    for line in out.splitlines():
        cname, what, value = line.split()
        want[(cname, what)] = int(value)
    got = {}
    for cname, py in _lib.STRUCTS.items():
        got[(cname, "sizeof")] = ctypes.sizeof(py)
        for fname, _ in py._fields_:
            got[(cname, fname)] = getattr(py, fname).offset
    assert got == want
