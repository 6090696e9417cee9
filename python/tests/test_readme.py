"""README.md's Python example, extracted as it stands and run in a fresh
interpreter from a folder whose models/ is FX_MODELS_DIR: it must run and
print what it says (a greedy continuation equal to generate's, a reply, the
ids and their text, the error)."""
import os
import re
import subprocess
import sys

import ferrox

from conftest import MODELS, ROOT, model_path


def example():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    sec = readme.split("\n## Python\n", 1)
    assert len(sec) == 2, "README.md has no '## Python' section"
    m = re.search(r"```python\n(.*?)```", sec[1], re.S)
    assert m, "no python block in README's Python section"
    return m.group(1)


def test_readme_example_runs(tmp_path, smollm2):
    model_path("smollm2")
    os.symlink(os.path.abspath(MODELS), tmp_path / "models")
    code = example()
    assert "ferrox.Model(" in code
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, timeout=600, text=True)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == smollm2.generate("The capital of France is", max_tokens=16, temperature=0).split("\n")[0]
    ids = smollm2.tokenize("Hello world")
    assert "%s %r" % (ids, "Hello world") in lines
    assert any(ln.startswith("error: ") and "missing.gguf" in ln for ln in lines)
    assert len(lines) >= 5
    assert ferrox.Error.__mro__[1] is RuntimeError
