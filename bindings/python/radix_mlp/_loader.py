"""Finds and loads libradix_mlp, declares its prototypes and checks its version.

Search order:
1. ``RADIX_MLP_LIB``: the full path of the shared library;
2. ``RADIX_MLP_LIB_DIR``: a folder holding ``libradix_mlp.so.0.3`` or ``libradix_mlp.so`` (a CMake
   build folder or an install prefix's ``lib``);
3. ``ctypes.util.find_library("radix_mlp")``;
4. the loader's default search for ``libradix_mlp.so.0.3`` (LD_LIBRARY_PATH, ld.so.cache).

A variable that is set but names nothing loadable is an error, never a silent fallback.
"""

import ctypes
import ctypes.util
import os

from . import _abi

def _abi_name(major, minor):
    """The ABI a version belongs to: its major version, and before 1.0 its minor one too."""
    return "%d.%d" % (major, minor) if major == 0 else "%d" % major


SONAME = "libradix_mlp.so." + _abi_name(_abi.RMLP_VERSION_MAJOR, _abi.RMLP_VERSION_MINOR)
_NAMES_IN_DIR = (SONAME, "libradix_mlp.so")


class LibraryNotFound(ImportError):
    """libradix_mlp could not be found or loaded (an ImportError, raised at import)."""


def _load_path(path, how):
    try:
        return ctypes.CDLL(path)
    except OSError as e:
        raise LibraryNotFound("radix_mlp: cannot load %s (%s): %s" % (path, how, e)) from e


def _find():
    """Returns (CDLL, description of where it came from)."""
    path = os.environ.get("RADIX_MLP_LIB")
    if path:
        if not os.path.isfile(path):
            raise LibraryNotFound(
                "radix_mlp: RADIX_MLP_LIB=%r is not a file; set it to the full path of libradix_mlp.so" % path
            )
        return _load_path(path, "from RADIX_MLP_LIB"), path

    folder = os.environ.get("RADIX_MLP_LIB_DIR")
    if folder:
        for name in _NAMES_IN_DIR:
            candidate = os.path.join(folder, name)
            if os.path.isfile(candidate):
                return _load_path(os.path.abspath(candidate), "from RADIX_MLP_LIB_DIR"), candidate
        raise LibraryNotFound(
            "radix_mlp: RADIX_MLP_LIB_DIR=%r holds neither %s; build the library "
            "(cmake --build BUILD --target radix_mlp) and point RADIX_MLP_LIB_DIR at that folder"
            % (folder, " nor ".join(_NAMES_IN_DIR))
        )

    found = ctypes.util.find_library("radix_mlp")
    tried = []
    for name in ([found] if found else []) + [SONAME]:
        try:
            return ctypes.CDLL(name), name
        except OSError as e:
            tried.append("%s: %s" % (name, e))
    raise LibraryNotFound(
        "radix_mlp: libradix_mlp was not found (%s). Install it (cmake --install), or set "
        "RADIX_MLP_LIB to the full path of libradix_mlp.so, or RADIX_MLP_LIB_DIR to its folder."
        % "; ".join(tried)
    )


def load():
    """Loads the library, declares the ABI and checks its version's ABI; returns (lib, where)."""
    lib, where = _find()
    missing = _abi.declare(lib)
    required = [n for n in missing if n != "rmlp_plan_params_from_env"]  # newer than 0.1.0's first cut
    if required:
        raise LibraryNotFound("radix_mlp: %s lacks the entry points %s" % (where, ", ".join(required)))
    version = lib.rmlp_version()
    major, minor = version >> 16, (version >> 8) & 0xFF
    theirs, ours = _abi_name(major, minor), _abi_name(_abi.RMLP_VERSION_MAJOR, _abi.RMLP_VERSION_MINOR)
    if theirs != ours:
        raise LibraryNotFound(
            "radix_mlp: %s is version %d.%d.%d (ABI %s) but these bindings are written for ABI %s"
            % (where, major, minor, version & 0xFF, theirs, ours)
        )
    return lib, where


LIB, LIB_PATH = load()
