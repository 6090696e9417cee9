"""ferrox: Python bindings of the ferrox inference engine (libferrox, bundled).

    import ferrox
    with ferrox.Model("model.gguf") as m:
        print(m.generate("The capital of France is", max_tokens=16, temperature=0))

See ferrox.Model. Errors from the library raise ferrox.Error (a
RuntimeError) carrying its message and status code.
"""
from ._model import Error, Model, POOLINGS

__all__ = ["Error", "Model", "POOLINGS", "__version__"]
try:  # the installed distribution's version (setup.py takes CMakeLists.txt's)
    from importlib.metadata import version as _version
    __version__ = _version("ferrox")
except Exception:  # run from a source tree without installing
    __version__ = "0+unknown"
