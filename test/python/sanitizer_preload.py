"""pytest plugin for sanitizer builds (cmake/sanitize.cmake, scripts/sanitize.sh): puts the sanitizer runtime
named by MSPROBE_TEST_PRELOAD first in LD_PRELOAD of every child process a test starts.

An ASan-instrumented libmsprobe_shim.so or stand-in library loaded into an uninstrumented host (/usr/bin/python3)
needs the ASan runtime first in the initial library list, or ASan refuses to start. The tests build their
children's environments in many ways (shimtest.run, edge_helpers.with_shim, dict(clean_env(), LD_PRELOAD=...)),
all of them ending in subprocess.Popen, so the prefix is applied there, once. Without MSPROBE_TEST_PRELOAD this
plugin does nothing. The variable itself is not passed on (the shim would warn about an unknown MSPROBE_* name).
"""
import os
import subprocess

PREFIX = os.environ.pop("MSPROBE_TEST_PRELOAD", "")  # read once; children never see it
# Whether the tests run under ASan, for the few that cannot (each says why in its skip message).
ASAN = "libasan" in PREFIX or "libasan" in os.environ.get("LD_PRELOAD", "")


def with_prefix(env):
    """A copy of `env` (str or bytes keys and values) with PREFIX first in LD_PRELOAD."""
    env = dict(env)
    for key in ("LD_PRELOAD", b"LD_PRELOAD"):
        if key in env:
            value = env.pop(key)
            if isinstance(value, bytes):
                value = value.decode()
            break
    else:
        value = ""
    first = PREFIX.split()
    libs = [lib for lib in value.replace(":", " ").split() if lib and lib not in first]
    # The runtime first; anything else it needs (libstdc++) after the test's own libraries: the shim answers the
    # runtime's early lookups with the next definition after the shim (shim/hooks/dl.cpp).
    env["LD_PRELOAD"] = " ".join(first[:1] + libs + first[1:])
    env.pop("MSPROBE_TEST_PRELOAD", None)
    return env


if PREFIX:
    _popen_init = subprocess.Popen.__init__

    def _init(self, args, *rest, env=None, **kwargs):
        if env is not None:
            env = with_prefix(env)
        _popen_init(self, args, *rest, env=env, **kwargs)

    subprocess.Popen.__init__ = _init
