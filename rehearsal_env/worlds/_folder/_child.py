"""The confined child that runs a world folder's code (a ``[data] generator``): run as a script, never imported.

The evaluator starts it fresh (``python -I -B _child.py REQUEST``: no fork of the evaluator, a minimal
environment, no inherited file descriptors but stdin, stdout and stderr, a new session; see
:mod:`._code`). Before the world's code is even read, this script, which imports only the standard
library, confines itself:

1. resource limits: address space, CPU seconds, size of any file written, open files, no core dumps;
2. ``PR_SET_NO_NEW_PRIVS``, and every capability dropped (bounding, ambient, effective, permitted,
   inheritable): a root child keeps uid 0 but none of its powers (no ``CAP_DAC_OVERRIDE``, no
   ``CAP_SYS_MODULE``, no ``CAP_SYS_PTRACE``);
3. Landlock (Linux >= 5.13): reading is allowed only beneath the world folder, the Python installation
   (standard library, ``lib-dynload``, site-packages), the system's shared libraries, the time-zone
   database and ``/dev/null``, ``/dev/zero``, ``/dev/urandom``; writing only beneath a scratch folder of
   its own (and ``/dev/null``). Nothing can be executed. Everything else, the state home, ``~``,
   ``/proc`` (so the evaluator's environment, command line, open files and root), ``/etc``, ``/tmp``
   and the rest of the disk, is refused by the kernel, whatever the child's uid. TCP ``bind``/``connect``
   are refused (ABI >= 4), and so are signals and abstract UNIX sockets out of the sandbox (ABI >= 6);
4. a seccomp filter: no socket at all (so no UNIX socket such as Docker's, which Landlock does not
   cover), no new process (``fork``, ``vfork``, ``clone`` without ``CLONE_THREAD``; threads still
   work), no ``ptrace``, ``process_vm_readv``/``writev``, ``pidfd_getfd``, ``kcmp``, ``io_uring``,
   kernel keyrings, ``bpf``, ``perf_event_open``, ``userfaultfd``, namespaces, mounts, module loading,
   or file handles (``open_by_handle_at``).

Only then does it import the generator and call ``rows(seed, anchor)``. The generator's own prints go
to stderr; its rows come back as one JSON object on the original stdout (``{"rows": {table: [[value,
...], ...]}}``, values ``None``, ``bool``, ``int``, ``float`` or ``str``) or ``{"error": kind,
"message": text}``. A machine that cannot confine (no Landlock, or a seccomp filter this script cannot
write for its architecture) is refused before anything of the folder runs, unless the request says
``trust`` (the user's explicit opt-in): then only the missing layer is left out.
"""

from __future__ import annotations

import ctypes
import datetime
import importlib.util
import json
import os
import platform
import resource
import sys
import sysconfig
import traceback
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, NoReturn

# -- Landlock (include/uapi/linux/landlock.h) ---------------------------------------------------
_SYS_LANDLOCK_CREATE_RULESET = 444
_SYS_LANDLOCK_ADD_RULE = 445
_SYS_LANDLOCK_RESTRICT_SELF = 446
_LANDLOCK_CREATE_RULESET_VERSION = 1
_LANDLOCK_RULE_PATH_BENEATH = 1
_FS_EXECUTE = 1 << 0
_FS_WRITE_FILE = 1 << 1
_FS_READ_FILE = 1 << 2
_FS_READ_DIR = 1 << 3
_FS_REMOVE_DIR = 1 << 4
_FS_REMOVE_FILE = 1 << 5
_FS_MAKE_DIR = 1 << 7
_FS_MAKE_REG = 1 << 8
_FS_TRUNCATE = 1 << 14
_FS_ALL_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1}
"""Every filesystem right each Landlock ABI knows (ABI >= 5 adds ``IOCTL_DEV``: bits 0..15)."""
_FS_FILE_RIGHTS = _FS_EXECUTE | _FS_WRITE_FILE | _FS_READ_FILE | _FS_TRUNCATE | (1 << 15)
"""The rights a rule on a single file (not a folder) may carry."""
_NET_BIND_TCP = 1 << 0
_NET_CONNECT_TCP = 1 << 1
_SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0
_SCOPE_SIGNAL = 1 << 1
_READ = _FS_READ_FILE | _FS_READ_DIR
_SCRATCH = (_READ | _FS_WRITE_FILE | _FS_REMOVE_DIR | _FS_REMOVE_FILE | _FS_MAKE_DIR | _FS_MAKE_REG
            | _FS_TRUNCATE)

# -- prctl, capabilities, seccomp ---------------------------------------------------------------
_PR_CAPBSET_DROP = 24
_PR_SET_NO_NEW_PRIVS = 38
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
_LAST_CAPABILITY = 63
_SECCOMP_RET_ALLOW = 0x7FFF0000
_SECCOMP_RET_ERRNO = 0x00050000
_SECCOMP_RET_KILL_PROCESS = 0x80000000
_EPERM = 1
_ENOSYS = 38
_CLONE_THREAD = 0x00010000
_X32_SYSCALL_BIT = 0x40000000
_BPF_LD_W_ABS = 0x20
_BPF_JEQ_K = 0x15
_BPF_JGE_K = 0x35
_BPF_JSET_K = 0x45
_BPF_RET_K = 0x06
_SECCOMP_DATA_NR = 0
_SECCOMP_DATA_ARCH = 4
_SECCOMP_DATA_ARG0 = 16  # the low 32 bits of args[0] (little-endian)

_DENIED_NAMES = ("socket", "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "pidfd_open", "kcmp",
                 "io_uring_setup", "keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd",
                 "unshare", "setns", "mount", "init_module", "finit_module", "open_by_handle_at",
                 "name_to_handle_at", "fork", "vfork")
_SYSCALLS = {
    # machine: (AUDIT_ARCH_*, {name: number}); numbers from asm/unistd_64.h and asm-generic/unistd.h
    "x86_64": (0xC000003E, {
        "socket": 41, "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "pidfd_getfd": 438,
        "pidfd_open": 434, "kcmp": 312, "io_uring_setup": 425, "keyctl": 250, "add_key": 248, "request_key": 249,
        "bpf": 321, "perf_event_open": 298, "userfaultfd": 323, "unshare": 272, "setns": 308, "mount": 165,
        "init_module": 175, "finit_module": 313, "open_by_handle_at": 304, "name_to_handle_at": 303, "fork": 57,
        "vfork": 58, "clone": 56, "clone3": 435}),
    "aarch64": (0xC00000B7, {
        "socket": 198, "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "pidfd_getfd": 438,
        "pidfd_open": 434, "kcmp": 272, "io_uring_setup": 425, "keyctl": 219, "add_key": 217, "request_key": 218,
        "bpf": 280, "perf_event_open": 241, "userfaultfd": 282, "unshare": 97, "setns": 268, "mount": 40,
        "init_module": 105, "finit_module": 273, "open_by_handle_at": 265, "name_to_handle_at": 264,
        "clone": 220, "clone3": 435}),
}
_SYSTEM_LIBRARIES = ("/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/local/lib", "/usr/share/zoneinfo",
                     "/etc/ld.so.cache", "/etc/localtime", "/dev/null", "/dev/zero", "/dev/urandom")
"""What the dynamic loader, ``time`` and ``random`` read (beside the Python installation)."""
_WRITABLE_DEVICES = ("/dev/null",)
MAX_MESSAGE_CHARS = 4000
"""The longest error text (a traceback's tail) sent back."""


class _Refused(Exception):
    """This machine cannot apply one layer of the confinement; the message says which and why."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


_libc = ctypes.CDLL(None, use_errno=True)  # the C library the interpreter runs on (no ldconfig run)
_LINUX = sys.platform == "linux"


def _c(name: str) -> Any:
    """A function of the C library, for Linux only.

    Raises:
        _Refused: not Linux, or the C library lacks it.
    """
    function = getattr(_libc, name, None) if _LINUX else None
    if function is None:
        raise _Refused(f"{name}() is not available ({sys.platform}: the confinement is written for Linux)")
    if name == "syscall":
        function.restype = ctypes.c_long
    if name == "prctl":
        function.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    return function


def _errno_text() -> str:
    return os.strerror(ctypes.get_errno())


def landlock_abi() -> int:
    """The Landlock ABI version this kernel offers (0: none)."""
    if not _LINUX:
        return 0
    abi = _c("syscall")(_SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0),
                        ctypes.c_uint32(_LANDLOCK_CREATE_RULESET_VERSION))
    return max(int(abi), 0)


def _readable_roots(folder: Path) -> list[Path]:
    paths = sysconfig.get_paths()
    roots = [folder, *(Path(paths[k]) for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths)]
    roots += [Path(p) for p in sys.path if p and os.path.isabs(p)]
    roots += [Path(sys.base_prefix) / "lib", Path(sys.prefix) / "lib", Path(sys.base_exec_prefix) / "lib"]
    roots += [Path(p) for p in _SYSTEM_LIBRARIES]
    return [r for r in dict.fromkeys(roots) if r.exists()]


def _check_away_from(roots: Iterable[Path], forbidden: Iterable[str]) -> None:
    for root in roots:
        real = root.resolve()
        for secret in forbidden:
            if Path(secret) == real or Path(secret).is_relative_to(real):
                raise _Refused(f"{secret} (the state home) lies inside {real}, which world code must be able to "
                               "read; move the state home (REHEARSAL_HOME) out of it")


def _add_rule(ruleset: int, path: Path, access: int) -> None:
    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        if not path.is_dir():
            access &= _FS_FILE_RIGHTS
        rule = _PathBeneathAttr(access, fd)
        if _c("syscall")(_SYS_LANDLOCK_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_LANDLOCK_RULE_PATH_BENEATH),
                         ctypes.byref(rule), ctypes.c_uint32(0)) != 0:
            raise _Refused(f"Landlock refused a rule for {path}: {_errno_text()}")
    finally:
        os.close(fd)


def landlock(folder: Path, scratch: Path, forbidden: list[str]) -> int:
    """Confine this process with Landlock (see the module docstring); returns the ABI used.

    Raises:
        _Refused: the kernel has no Landlock, or refused the ruleset.
    """
    abi = landlock_abi()
    if abi < 1:
        raise _Refused(f"this kernel has no Landlock ({_errno_text()}; Linux >= 5.13 with landlock among its "
                       "LSMs, not blocked by a container's seccomp profile)")
    handled_fs = _FS_ALL_BY_ABI.get(abi, (1 << 16) - 1)
    attr = _RulesetAttr(handled_fs, _NET_BIND_TCP | _NET_CONNECT_TCP if abi >= 4 else 0,
                        _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL if abi >= 6 else 0)
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    ruleset = _c("syscall")(_SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size),
                            ctypes.c_uint32(0))
    if ruleset < 0:
        raise _Refused(f"Landlock refused the ruleset: {_errno_text()}")
    try:
        readable = _readable_roots(folder)
        _check_away_from([*readable, scratch], forbidden)
        for root in readable:
            _add_rule(ruleset, root, _READ & handled_fs)
        for device in _WRITABLE_DEVICES:
            _add_rule(ruleset, Path(device), (_FS_READ_FILE | _FS_WRITE_FILE) & handled_fs)
        _add_rule(ruleset, scratch, _SCRATCH & handled_fs)
        if _c("syscall")(_SYS_LANDLOCK_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            raise _Refused(f"Landlock could not restrict this process: {_errno_text()}")
    finally:
        os.close(ruleset)
    return abi


def _no_new_privileges() -> None:
    if _c("prctl")(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise _Refused(f"prctl(PR_SET_NO_NEW_PRIVS) failed: {_errno_text()}")


def drop_capabilities() -> None:
    """Every capability out of every set (a root child keeps uid 0, without its powers)."""
    for cap in range(_LAST_CAPABILITY + 1):
        _c("prctl")(_PR_CAPBSET_DROP, cap, 0, 0, 0)  # EINVAL past the last one, EPERM if already gone: both fine
    _c("prctl")(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    if _c("capset")(ctypes.byref(header), data) != 0:
        raise _Refused(f"capset could not drop the capabilities: {_errno_text()}")


def _seccomp_program() -> list[tuple[int, int, int, int]]:
    machine = platform.machine()
    if machine not in _SYSCALLS:
        raise _Refused(f"no seccomp filter is written for the {machine} architecture (only {', '.join(_SYSCALLS)})")
    arch, numbers = _SYSCALLS[machine]
    deny = (_SECCOMP_RET_ERRNO | _EPERM)
    prog = [(_BPF_LD_W_ABS, 0, 0, _SECCOMP_DATA_ARCH), (_BPF_JEQ_K, 1, 0, arch),
            (_BPF_RET_K, 0, 0, _SECCOMP_RET_KILL_PROCESS), (_BPF_LD_W_ABS, 0, 0, _SECCOMP_DATA_NR)]
    if machine == "x86_64":  # the x32 ABI reaches the same calls under other numbers: refuse it whole
        prog += [(_BPF_JGE_K, 0, 1, _X32_SYSCALL_BIT), (_BPF_RET_K, 0, 0, _SECCOMP_RET_ERRNO | _ENOSYS)]
    for name in _DENIED_NAMES:
        if name in numbers:
            prog += [(_BPF_JEQ_K, 0, 1, numbers[name]), (_BPF_RET_K, 0, 0, deny)]
    # clone3's flags sit behind a pointer: ENOSYS makes the C library fall back to clone, whose flags are read
    prog += [(_BPF_JEQ_K, 0, 1, numbers["clone3"]), (_BPF_RET_K, 0, 0, _SECCOMP_RET_ERRNO | _ENOSYS),
             (_BPF_JEQ_K, 0, 4, numbers["clone"]), (_BPF_LD_W_ABS, 0, 0, _SECCOMP_DATA_ARG0),
             (_BPF_JSET_K, 0, 1, _CLONE_THREAD), (_BPF_RET_K, 0, 0, _SECCOMP_RET_ALLOW),
             (_BPF_RET_K, 0, 0, deny), (_BPF_RET_K, 0, 0, _SECCOMP_RET_ALLOW)]
    return prog


def seccomp() -> None:
    """Install the system-call filter (see the module docstring)."""
    prog = _seccomp_program()
    filters = (_SockFilter * len(prog))(*(_SockFilter(*ins) for ins in prog))
    fprog = _SockFprog(len(prog), ctypes.cast(filters, ctypes.POINTER(_SockFilter)))
    if _c("prctl")(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0) != 0:
        raise _Refused(f"the seccomp filter could not be installed: {_errno_text()}")


def _limits(request: Mapping[str, Any]) -> None:
    for which, value in ((resource.RLIMIT_AS, request["memory_bytes"]), (resource.RLIMIT_CPU, request["cpu_s"]),
                         (resource.RLIMIT_FSIZE, request["file_bytes"]), (resource.RLIMIT_NOFILE, request["files"]),
                         (resource.RLIMIT_CORE, 0)):
        _, hard = resource.getrlimit(which)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (value, value))


def confine(request: Mapping[str, Any]) -> list[str]:
    """Every layer of the confinement; returns the layers left out (only where ``trust`` allowed it).

    Raises:
        _Refused: a layer cannot be applied and the request does not trust the code.
    """
    _limits(request)
    left_out = []
    layers = [_no_new_privileges, drop_capabilities,
              lambda: landlock(Path(request["folder"]), Path(request["scratch"]), request["forbidden"]), seccomp]
    if request.get("skip"):  # a test's control run: the probe must find what nothing stops it from reading
        layers, left_out = layers[:2], ["Landlock and seccomp left out by the caller"]
    for layer in layers:
        try:
            layer()
        except _Refused as exc:
            if not request["trust"]:
                raise
            left_out.append(str(exc))
    return left_out


def _value(value: Any, table: str, row: int, column: int) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise ValueError(f"table {table!r}, row {row}, column {column} holds a {type(value).__name__}; a seed value is "
                     "None, an int, a float or a str (write a date as value.isoformat())")


def plain_rows(result: Any) -> dict[str, list[list[Any]]]:
    """``rows()``'s answer as JSON-able data.

    Raises:
        ValueError: it is not ``{table: [row, ...]}`` of plain values.
    """
    if not isinstance(result, Mapping):
        raise ValueError(f"rows() returned a {type(result).__name__}; expected a dict {{table name: [tuple, ...]}}")
    out: dict[str, list[list[Any]]] = {}
    for table, rows in result.items():
        if not isinstance(table, str):
            raise ValueError(f"rows() returned a table named {table!r}; table names are str")
        if isinstance(rows, str | bytes | Mapping) or not isinstance(rows, Iterable):
            raise ValueError(f"rows() returned a {type(rows).__name__} for table {table!r}; expected a list of tuples")
        out[table] = []
        for i, row in enumerate(rows):
            if isinstance(row, str | bytes | Mapping) or not isinstance(row, Iterable):
                raise ValueError(f"table {table!r}, row {i} is a {type(row).__name__}; expected a tuple of values")
            out[table].append([_value(v, table, i, j) for j, v in enumerate(row)])
    return out


def _raised(exc: BaseException) -> str:
    """One line: the exception and where in the world's code it was raised."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename != __file__]
    at = f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
    text = " ".join(traceback.format_exception_only(exc)[-1].split())
    return (text[:MAX_MESSAGE_CHARS] + at)


def _answer(out: Any, body: Mapping[str, Any], code: int) -> NoReturn:
    out.write(json.dumps(body, allow_nan=False))
    out.flush()
    os._exit(code)


def main(argv: list[str]) -> NoReturn:
    """Confine, run ``rows(seed, anchor)`` of the generator the request names, answer on stdout."""
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # the generator's own prints go to stderr, never into the answer
    request = json.loads(argv[1])
    try:
        left_out = confine(request)
    except _Refused as exc:
        _answer(out, {"error": "unconfined", "message": str(exc)}, 3)
    sys.dont_write_bytecode = True
    os.chdir(request["scratch"])
    path = Path(request["file"])
    try:
        spec = importlib.util.spec_from_file_location("rehearsal_world_code", path)
        if spec is None or spec.loader is None:
            _answer(out, {"error": "unloadable", "message": f"{path} cannot be loaded as a Python module"}, 2)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        function = getattr(module, request["function"], None)
        if not callable(function):
            _answer(out, {"error": "missing", "message": f"{path} defines no {request['function']}()"}, 2)
        result = function(request["seed"], datetime.date.fromisoformat(request["anchor"]))
    except BaseException as exc:  # noqa: BLE001 - whatever the world's code raised is its error, reported as text
        _answer(out, {"error": "raised", "message": _raised(exc)}, 2)
    try:
        rows = plain_rows(result)
        text = json.dumps({"rows": rows, "left_out": left_out}, allow_nan=False)
    except ValueError as exc:  # not {table: [row, ...]} of plain values, or a NaN or infinite float
        _answer(out, {"error": "values", "message": str(exc)[:MAX_MESSAGE_CHARS]}, 2)
    out.write(text)
    out.flush()
    os._exit(0)

if __name__ == "__main__":
    main(sys.argv)
