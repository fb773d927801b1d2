"""The msprobe-shim and msprobe-inspect console scripts.

msprobe-shim [options] -- COMMAND [ARGS...]
    Adds the packaged libmsprobe_shim.so to LD_PRELOAD (after what is already there), sets one MSPROBE_*
    variable per option given, and then *replaces itself* with COMMAND (execvp): COMMAND runs with the same
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

# (flag, variable, accepted keywords or None when the shim checks the value itself, help).
# Keywords are case-insensitive, as in the shim (docs/configuration.md); the value is passed on as written.
OPTIONS = [
    ("--task", "MSPROBE_TASK", ["statistics", "tensor", "overflow_check", "structure"], "what to dump"),
    ("--dump-path", "MSPROBE_DUMP_PATH", None, "output root (relative to the program's working directory)"),
    ("--config", "MSPROBE_CONFIG", None, "an msprobe config.json; options given here override its fields"),
    ("--step", "MSPROBE_STEP", None, "steps to dump: all, or numbers and ranges such as 0,2,4-6"),
    ("--rank", "MSPROBE_RANK", None, "ranks to dump: all, or numbers and ranges such as 0,2,4-6"),
    ("--list", "MSPROBE_LIST", None, "kernel items to dump (op types, names, name-regex(R)), comma-separated"),
    ("--scope", "MSPROBE_SCOPE", None, "first,last: dump from the first item to the last in each step"),
    ("--data-mode", "MSPROBE_DATA_MODE", ["all", "input", "output"], "which side of each kernel"),
    ("--summary-mode", "MSPROBE_SUMMARY_MODE", ["statistics", "md5"], "md5 adds a CRC-32 of each tensor"),
    ("--file-format", "MSPROBE_FILE_FORMAT", ["npy", "bin"], "tensor file format (tensor task)"),
    ("--stack", "MSPROBE_STACK", ["off", "native", "python", "mixed"], "call stacks recorded in stack.json"),
    ("--compress", "MSPROBE_COMPRESS", ["off", "lz4"], "compress tensor files"),
    ("--buffer-mb", "MSPROBE_BUFFER_MB", None, "pinned host buffer, MiB"),
    ("--overflow-nums", "MSPROBE_OVERFLOW_NUMS", None, "overflow_check: stop after N overflows (-1: never)"),
    ("--step-marker", "MSPROBE_STEP_MARKER", None, "regular expression over op types that ends a step, or off"),
    ("--precision", "MSPROBE_PRECISION", ["low", "high"], "statistics precision"),
    ("--device-stats", "MSPROBE_DEVICE_STATS",
     ["on", "off", "1", "0", "true", "false", "yes", "no"], "compute statistics on the device"),
    ("--log-level", "MSPROBE_LOG_LEVEL", ["error", "warn", "info", "debug", "0", "1", "2", "3", "4"],
     "the shim's messages on stderr"),
    ("--enable", "MSPROBE_ENABLE", ["1", "0", "true", "false", "on", "off", "yes", "no"],
     "0 loads the shim but passes every call through"),
]


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


def keyword(flag, accepted):
    def check(value):
        if value.strip().lower() not in accepted:
            raise argparse.ArgumentTypeError(f"unknown value {value!r}; accepted: {', '.join(accepted)}")
        return value
    return check


def not_empty(flag):
    def check(value):
        if value == "":
            raise argparse.ArgumentTypeError("empty value (leave the option out to get the default)")
        return value
    return check


def parser():
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
    for flag, var, accepted, text in OPTIONS:
        if accepted:
            p.add_argument(flag, dest=var, metavar="|".join(accepted) if len(accepted) <= 5 else "VALUE",
                           type=keyword(flag, accepted), help=f"{text} ({var})")
        else:
            p.add_argument(flag, dest=var, metavar="VALUE", type=not_empty(flag), help=f"{text} ({var})")
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
    args = parser().parse_args(options)
    if args.print_preload:
        if command:
            return fail("--print-preload takes no command")
        status = check_library()
        if status:
            return status
        print(LIBRARY)
        return 0
    if not command:
        return fail("no command: put it after '--', as in: msprobe-shim --task tensor -- python train.py")
    config = getattr(args, "MSPROBE_CONFIG")
    if config is not None and not os.path.isfile(config):
        return fail(f"--config: {config!r} is not a file")
    status = check_library()
    if status:
        return status
    env = dict(os.environ)
    for _, var, _, _ in OPTIONS:
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
