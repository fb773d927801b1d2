"""The msprobe-shim and msprobe-inspect console scripts.

msprobe-shim [options] -- COMMAND [ARGS...]
    Adds the packaged libmsprobe_shim.so to LD_PRELOAD (after what is already there), sets one MSPROBE_*
    variable per option given (the options are the shim's settings, read from the packaged library: one per
    MSPROBE_* variable, each value checked by the shim's own rules), and then *replaces itself* with COMMAND
    (execvp): COMMAND runs with the same
    process id, process group, terminal, working directory, open files and signal dispositions the launcher
    had. So every signal sent to the launcher (SIGINT, SIGTERM, Ctrl-C from the terminal, ...) reaches the
    program, exactly once, and the launcher's exit status is the program's, or it dies of the same signal:
    the launcher is the program. Nothing else of the environment is changed.
msprobe-shim --print-preload
    Prints the path of the packaged library, for those who set LD_PRELOAD themselves.
msprobe-inspect ARGS...
    Runs the packaged msprobe-inspect with ARGS (execv: same status, same signals).
"""
import argparse
import os
import signal
import sys

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
LIBRARY = os.path.join(PACKAGE_DIR, "lib", "libmsprobe_shim.so")
INSPECT = os.path.join(PACKAGE_DIR, "bin", "msprobe-inspect")
PROG = "msprobe-shim"

# The options are the shim's settings, asked of the packaged library itself (msprobe_shim_settings, in
# shim/hooks/settings.cpp): the variables of the table the shim's configuration reads, each with what it accepts,
# in the table's order. --task for MSPROBE_TASK, --flight-kernels for MSPROBE_FLIGHT_KERNELS: a setting added to the
# shim is an option here with no second edit. Each value is checked by the shim's own parser for that variable
# (msprobe_shim_check_setting) and passed on as written.
#
# The library is asked in a child Python that preloads it (with MSPROBE_ENABLE=0: a pure pass-through): it uses
# initial-exec TLS, as a preloaded library may, so dlopen (ctypes) cannot load it into a running process.
PREFIX = "MSPROBE_"
ASK = r"""
import ctypes, json, sys
lib = ctypes.CDLL(sys.argv[1])  # the preloaded library itself
lib.msprobe_shim_settings.restype = ctypes.c_char_p
check = lib.msprobe_shim_check_setting
check.restype = ctypes.c_int
check.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
verdicts = []
for variable, value in json.loads(sys.argv[2]):
    why = ctypes.create_string_buffer(512)
    ok = check(variable.encode(), value.encode("utf-8", "surrogateescape"), why, len(why))
    verdicts.append(None if ok == 1 else why.value.decode("utf-8", "replace"))
sys.stdout.write(json.dumps({"settings": json.loads(lib.msprobe_shim_settings().decode("utf-8")),
                             "verdicts": verdicts}))
"""


class SettingsError(Exception):
    pass


class Settings:
    """The packaged library's settings table, [(flag, variable, accepted)], and its verdict on the values given."""

    def __init__(self, candidates):
        """candidates: [(variable, value)] to check (every --name VALUE of the command line, whatever the name)."""
        import json
        import subprocess
        env = dict(os.environ)
        env["MSPROBE_ENABLE"] = "0"
        env["LD_PRELOAD"] = preload_value(env.get("LD_PRELOAD", ""))
        try:
            p = subprocess.run([sys.executable, "-I", "-S", "-c", ASK, LIBRARY, json.dumps(candidates)], env=env,
                               stdin=subprocess.DEVNULL, capture_output=True, timeout=600)
        except (OSError, subprocess.SubprocessError) as exc:
            raise SettingsError(str(exc)) from exc
        try:
            answer = json.loads(p.stdout.decode("utf-8"))
        except ValueError:
            lines = p.stderr.decode("utf-8", "replace").strip().splitlines()
            raise SettingsError(lines[-1] if lines else f"exit status {p.returncode}") from None
        self.options = [(flag_of(s["variable"]), s["variable"], s["accepted"]) for s in answer["settings"]]
        self._verdicts = {tuple(c): v for c, v in zip(candidates, answer["verdicts"])}

    def check(self, variable, value):
        """None when the shim accepts `value` for `variable`, else its reason ("" when none beyond "not valid")."""
        return self._verdicts.get((variable, value), "")


def candidates(options):
    """(MSPROBE_NAME, value) for each --name VALUE or --name=VALUE among the options."""
    out = []
    for i, arg in enumerate(options):
        if not arg.startswith("--") or arg == "--":
            continue
        name, eq, value = arg[2:].partition("=")
        if not eq:
            if i + 1 >= len(options):
                continue
            value = options[i + 1]
        out.append((PREFIX + name.upper().replace("-", "_"), value))
    return out


def dump_path_of(options):
    """The dump path the program will use when no --dump-path is given: MSPROBE_DUMP_PATH, else --config's (or
    MSPROBE_CONFIG's) "dump_path", else the shim's default."""
    if os.environ.get("MSPROBE_DUMP_PATH"):
        return os.environ["MSPROBE_DUMP_PATH"]
    config = dict(candidates(options)).get("MSPROBE_CONFIG") or os.environ.get("MSPROBE_CONFIG")
    if config:
        import json
        try:
            with open(config, encoding="utf-8") as f:
                path = json.load(f).get("dump_path")
            if isinstance(path, str) and path:
                return path
        except (OSError, ValueError, AttributeError):
            pass  # the shim says what is wrong with the file
    return "./msprobe_dump"


def flag_of(variable):
    """MSPROBE_FLIGHT_KERNELS -> --flight-kernels."""
    return "--" + variable[len(PREFIX):].lower().replace("_", "-")


def version():
    try:
        from importlib.metadata import version as v  # Python 3.8+
        return v("msprobe_shim")
    except Exception:  # noqa: BLE001 - an uninstalled checkout or Python 3.7
        return "unknown"


class Parser(argparse.ArgumentParser):
    def error(self, message):
        # One line, naming the problem; exit 2 as argparse does.
        sys.stderr.write(f"{PROG}: {message} (see {PROG} --help)\n")
        sys.exit(2)


def shim_value(settings, variable, accepted):
    """An option's value as the shim reads its variable: refused here, with what the shim accepts, if not valid."""
    def check(value):
        if value == "":
            raise argparse.ArgumentTypeError("empty value (leave the option out to get the default)")
        why = settings.check(variable, value)
        if why == "":
            raise argparse.ArgumentTypeError(f"unknown value {value!r}; accepted: {accepted}")
        if why is not None:
            raise argparse.ArgumentTypeError(f"invalid value {value!r} ({why}); accepted: {accepted}")
        return value
    return check


def parser(settings):
    p = Parser(
        prog=PROG,
        usage=f"{PROG} [options] -- COMMAND [ARGS...]\n       {PROG} --print-preload",
        description="Run COMMAND with libmsprobe_shim.so preloaded: every device kernel's inputs and outputs are "
                    "dumped (msprobe's step{N}/rank{R}/ layout). Each option sets the MSPROBE_* variable named "
                    "after it (docs/configuration.md); MSPROBE_* variables already set are kept unless an option "
                    "overrides them. COMMAND replaces the launcher (same process, same signals, same exit status).",
        epilog="example: msprobe-shim --task tensor --dump-path ./dump -- python train.py")
    p.add_argument("--print-preload", action="store_true",
                   help="print the path of the packaged libmsprobe_shim.so and exit")
    p.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    for flag, var, accepted in settings.options:
        p.add_argument(flag, dest=var, metavar="VALUE", type=shim_value(settings, var, accepted),
                       help=f"{accepted} ({var})".replace("%", "%%"))
    return p


def fail(message, status=2):
    sys.stderr.write(f"{PROG}: {message}\n")
    return status


def check_library():
    if not os.path.isfile(LIBRARY):
        return fail(f"the packaged library {LIBRARY} is missing; reinstall the msprobe_shim wheel", 1)
    # ld.so splits LD_PRELOAD at spaces and colons: such a path cannot be preloaded.
    if any(c in LIBRARY for c in " :\t\n"):
        return fail(f"the library path {LIBRARY!r} holds a space or a colon, which LD_PRELOAD cannot carry; "
                    f"install the wheel under a path without them", 1)
    return 0


def preload_value(current):
    """LD_PRELOAD with the shim appended: what is there stays first and as written; not added twice."""
    entries = current.replace(" ", ":").split(":")
    if any(os.path.abspath(e) == LIBRARY for e in entries if "/" in e):
        return current
    if not current.strip(" :"):
        return LIBRARY
    return current + ("" if current[-1] in " :" else ":") + LIBRARY


def restore_signals():
    # The Python interpreter running this script ignores SIGPIPE and SIGXFSZ, and exec keeps ignored signals
    # ignored: put them back as subprocess does (restore_signals=True), so the program starts as it would
    # from the shell. Handled signals (SIGINT) go back to their default by exec itself.
    for name in ("SIGPIPE", "SIGXFSZ", "SIGXFZ"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)


def exec_command(argv, env):
    restore_signals()
    try:
        os.execvpe(argv[0], argv, env)
    except OSError as exc:
        # As a shell does: 127 when there is no such command, 126 when it cannot be run.
        status = 127 if isinstance(exc, FileNotFoundError) else 126
        return fail(f"cannot run {argv[0]!r}: {exc.strerror}", status)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--" in argv:
        i = argv.index("--")
        options, command = argv[:i], argv[i + 1:]
    else:
        options, command = argv, []
    status = check_library()
    if status:
        return status
    asked = candidates(options)
    # The dump path is checked before the program starts (a long job must not run with capture off for want of it).
    given = dict(asked).get("MSPROBE_DUMP_PATH")
    dump_path = given if given is not None else dump_path_of(options)
    if given is None:
        asked.append(("MSPROBE_DUMP_PATH", dump_path))
    try:
        settings = Settings(asked)
    except SettingsError as exc:
        return fail(f"cannot read the settings of the packaged library {LIBRARY} ({exc}); reinstall the msprobe_shim "
                    f"wheel", 1)
    args = parser(settings).parse_args(options)
    if args.print_preload:
        if command:
            return fail("--print-preload takes no command")
        print(LIBRARY)
        return 0
    if not command:
        return fail("no command: put it after '--', as in: msprobe-shim --task tensor -- python train.py")
    config = getattr(args, "MSPROBE_CONFIG", None)
    if config is not None and not os.path.isfile(config):
        return fail(f"--config: {config!r} is not a file")
    if given is None and settings.check("MSPROBE_DUMP_PATH", dump_path) is not None:
        return fail(f"the dump path {dump_path!r} cannot be used: {settings.check('MSPROBE_DUMP_PATH', dump_path)}"
                    f" (set --dump-path)")
    env = dict(os.environ)
    for _, var, _ in settings.options:
        value = getattr(args, var)
        if value is not None:
            env[var] = value
    env["LD_PRELOAD"] = preload_value(env.get("LD_PRELOAD", ""))
    sys.stdout.flush()
    sys.stderr.flush()
    return exec_command(command, env)


def inspect_main():
    if not os.access(INSPECT, os.X_OK):
        return fail(f"the packaged {INSPECT} is missing or not executable; reinstall the msprobe_shim wheel", 1)
    restore_signals()
    os.execv(INSPECT, ["msprobe-inspect"] + sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
