"""Commands run as a user runs them, thousands of times, cheaply: a zygote process imports each command's module
once, on its first run, and forks a child per run (its own process group, signals at their defaults, in its own
folder), so a run costs its work, not an import of torch (nor the compiler stack torch's optimisers load on first
use). One zygote serves every command of a test process: torch and the env are imported once per test process, not
once per command. The harnesses of tests/commands use it, and conftest.run_script for every command run that needs
no environment of its own."""

from __future__ import annotations

import hashlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from conftest import REPO

ZYGOTE = r"""
import importlib, json, os, signal, sys, traceback
sys.path.insert(0, sys.argv[1])
for line in sys.stdin:
    case = json.loads(line)
    module = importlib.import_module(case["command"])  # here, before the fork: imported once, for every later run
    if "torch" in sys.modules:  # what torch's first optimiser or compiled function would load in every child
        import torch._dynamo  # noqa: F401
    pid = os.fork()
    if pid == 0:
        os.setpgid(0, 0)  # its own group, as a shell's job: a signal reaches it and any worker it starts
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT, signal.SIGTERM])
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        sys.argv = [case["command"].replace(".", "/") + ".py"]
        os.chdir(case["cwd"])
        if case.get("env") is not None:  # the caller's environment now (a test may have set a variable since)
            os.environ.clear()
            os.environ.update(case["env"])
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)  # not the zygote's pipe of cases
        for fd, name in ((1, "out"), (2, "err")):
            handle = os.open(case[name], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(handle, fd)
        try:
            code = module.main(case["argv"])
        except SystemExit as exit:
            code = exit.code if isinstance(exit.code, int) else int(exit.code is not None)
        except BaseException:
            traceback.print_exc()
            code = 99
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    print(json.dumps(pid), flush=True)
    _, status = os.waitpid(pid, 0)
    print(json.dumps(os.waitstatus_to_exitcode(status)), flush=True)
"""


def tree(root: Path) -> dict[str, str]:
    """Every entry under `root`, links not followed, files by their SHA-256."""
    found = {}
    for directory, folders, files in os.walk(root):
        for name in folders + files:
            path = Path(directory) / name
            found[path.relative_to(root).as_posix()] = (
                f"link {os.readlink(path)}" if path.is_symlink() else
                hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir")
    return found


class _Server:
    """The zygote process: command modules imported on first use; each case is forked and reaped in turn."""

    def __init__(self, bars: bool) -> None:
        env = {**os.environ, "OMP_NUM_THREADS": "1", "SDL_VIDEODRIVER": "dummy", "PYTHONUNBUFFERED": "1",
               **({} if bars else {"TQDM_DISABLE": "1"})}
        self.process = subprocess.Popen([sys.executable, "-c", ZYGOTE, str(REPO)], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, cwd=REPO, env=env)

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=60)
        self.process.stdout.close()


class Zygote:
    """One command of the shared zygote; each `run` forks a child that runs its main(argv) in `cwd`."""

    def __init__(self, server: _Server, command: str) -> None:
        """`command`: a module name (`train`, `tools.plot_curves`)."""
        self.server, self.command = server, command

    def run(self, argv: list[str], cwd: Path, signal_after: float | None = None,
            signum: int = signal.SIGINT, deadline: float | None = None,
            streams: Path | None = None, env: dict[str, str] | None = None) -> tuple[int, str, str, float]:
        """(exit code, stdout, stderr, seconds) of one run, signalled `signal_after` seconds after its fork. With
        `deadline`, a run still going that many seconds after its fork is a hang: it is killed, and its exit code
        is None. Its stdout and stderr go through files beside `cwd`, or in `streams` when given; `env` replaces the
        zygote's environment for the run (what is read at import stays the zygote's)."""
        try:
            return self._run(argv, cwd, signal_after, signum, deadline, streams, env)
        except BaseException:  # a run cut off half way (a failed test, Ctrl-C): its answers would reach the next
            self.server.process.kill()
            raise

    def _run(self, argv: list[str], cwd: Path, signal_after: float | None, signum: int, deadline: float | None,
             streams: Path | None, env: dict[str, str] | None) -> tuple[int, str, str, float]:
        where, stem = (streams, "run") if streams is not None else (cwd.parent, cwd.name)
        out, err = where / f"{stem}.out", where / f"{stem}.err"
        process = self.server.process
        case = {"command": self.command, "argv": argv, "cwd": str(cwd), "out": str(out), "err": str(err), "env": env}
        process.stdin.write(json.dumps(case) + "\n")
        process.stdin.flush()
        pid = json.loads(process.stdout.readline())
        started = time.perf_counter()
        if signal_after is not None:
            time.sleep(signal_after)
            try:
                os.killpg(pid, signum)
            except ProcessLookupError:  # it finished first: a complete result
                pass
        if deadline is not None:
            answer: queue.SimpleQueue = queue.SimpleQueue()
            threading.Thread(target=lambda: answer.put(process.stdout.readline()), daemon=True).start()
            try:
                line = answer.get(timeout=deadline)
            except queue.Empty:
                os.killpg(pid, signal.SIGKILL)
                answer.get()  # the zygote reaps it and says so
                return None, out.read_text(), err.read_text(), time.perf_counter() - started
            return json.loads(line), out.read_text(), err.read_text(), time.perf_counter() - started
        code = json.loads(process.stdout.readline())
        return code, out.read_text(), err.read_text(), time.perf_counter() - started


_shared: dict[bool, _Server] = {}


def shared(command: str, bars: bool = False) -> Zygote:
    """`command` run by this test process's zygote, started on first use and kept for every later test (closed when
    the session ends): importing a command and torch's compiler stack costs seconds, a harness case a fraction
    of one. A zygote keeps no state between runs (each run is a fork), so tests cannot see each other's; one
    whose run was cut off is replaced. `bars`: progress bars drawn as for a user (the harnesses turn them off)."""
    server = _shared.get(bars)
    if server is None or server.process.poll() is not None:
        server = _shared[bars] = _Server(bars)
    return Zygote(server, command)


def close_shared() -> None:
    for server in _shared.values():
        if server.process.poll() is None:
            server.close()
    _shared.clear()
