"""The one execution seam of the embarrassingly parallel work (collection episodes, judge jobs): a lazily fed map
over this process, a pool of local processes, or Ray tasks on a cluster, with the same results on each.

A run hands over `setup` and `context`, both picklable: every worker calls setup(context) once and gets the function
that turns one item into its result, so heavy state (an env and a policy, a judgement's datasets) is built or sent
once per worker, not once per item. Only this module imports Ray, and only when a Backend asks for it
(requirements-ray.txt).
"""

from __future__ import annotations

import collections
import contextlib
import importlib.util
import itertools
import logging
import multiprocessing
import multiprocessing.connection
import multiprocessing.forkserver
import multiprocessing.resource_tracker
import os
import pickle
import queue
import signal
import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any, TypeVar

from common import interrupts
from common.cli import BadInput, first_line
from common.files import CHECKOUT

C = TypeVar("C")
T = TypeVar("T")
R = TypeVar("R")
Setup = Callable[[C], Callable[[T], R]]

INTERRUPT_POLL_S = 0.2  # how often a wait for results looks for a noted Ctrl-C / SIGTERM
MAX_WORKERS = 1024  # --workers' bound: more processes or Ray tasks at once than a machine or a modest cluster runs
AHEAD = 2  # items in flight per worker: one running and one queued, so no worker waits for the driver
RAY_INSTALL = "pip install -r requirements-ray.txt"
RAY_RESERVE_S = 60.0  # how long a cluster may take to free --workers CPUs before the run is refused
RAY_POLL_S, RAY_ANSWER_S = 10.0, 30.0  # while waiting, the cluster is asked every POLL s and must answer in ANSWER s
RAY_CONNECT_S = 10.0  # how long a cluster's HOST:PORT may take to accept a connection before the run is refused


@dataclass(frozen=True)
class Backend:
    """Where items run: this process (1 worker, no Ray), `workers` local processes, or at most `workers` Ray tasks
    at a time on the cluster at `ray` ("": RAY_ADDRESS if set, else a local Ray started for the run)."""

    workers: int = 1
    ray: str | None = None

    def __str__(self) -> str:
        return f"{self.workers} {'Ray ' if self.ray is not None else ''}worker(s)"


def backend(workers: int, ray: str | None) -> Backend:
    """The backend that --workers and --ray ask for, checked here for every command: bad input for a --workers out
    of [1, MAX_WORKERS] (a huge one would only fail deep in the feeding of items), or --ray where Ray is not
    installed."""
    if not 1 <= workers <= MAX_WORKERS:
        raise BadInput(f"--workers must be in [1, {MAX_WORKERS}], got {workers}")
    if ray is not None and importlib.util.find_spec("ray") is None:
        raise BadInput(f"--ray needs Ray, which is not installed here: {RAY_INSTALL}")
    return Backend(workers, ray)


class Stopped(Exception):
    """The run cannot go on: a task failed (it is named), or the workers or the cluster are gone. What was yielded
    before is complete; the message is one line for the user."""


def _worker_gone() -> Exception:
    """What a dead worker means: the signal the whole process group got (Ctrl-C or SIGTERM to the job, which the
    workers share with us: `interrupts.Interrupted` is raised), else the worker alone was killed or ran out of
    memory."""
    interrupts.check()
    return Stopped("a worker process died (killed, or out of memory)")


class KeepComplete(contextlib.AbstractContextManager):
    """Ends its `with` block quietly on Stopped or a noted Ctrl-C / SIGTERM and keeps the reason, so the caller
    saves what is complete and says why in one line."""

    reason: str | None = None

    def __exit__(self, kind: type | None, error: BaseException | None, _traceback: object) -> bool:
        if isinstance(error, Stopped | interrupts.Interrupted):
            self.reason = "interrupted" if isinstance(error, interrupts.Interrupted) else str(error)
            return True
        return False


def imap(setup: Setup, context: Any, items: Iterable[T], backend: Backend, name: Callable[[T], str],
         ordered: bool = True) -> Iterator[tuple[T, Any]]:
    """(item, result) pairs, in item order (`ordered`) or as they finish. Items are taken lazily, AHEAD per worker
    in flight; closing the iterator early stops what is still running. A task that raises ends the run as Stopped,
    named by `name(item)` (Ray retries it once first); in this process its exception propagates as it is."""
    if backend.workers == 1 and backend.ray is None:
        run = setup(context)
        for item in items:
            interrupts.check()
            yield item, run(item)
        return
    runner = _Ray(setup, context, backend) if backend.ray is not None else _Processes(setup, context, backend.workers)
    feed = iter(items)
    pending: dict[Any, T] = {}  # handle -> item, in submission order

    def submit(count: int) -> None:
        for item in itertools.islice(feed, count):
            pending[runner.submit(item)] = item

    try:
        submit(AHEAD * backend.workers)
        while pending:
            handle = next(iter(pending)) if ordered else runner.first_done(pending)
            item = pending.pop(handle)
            result = runner.result(handle, name(item))
            submit(1)
            yield item, result
    finally:
        runner.close(list(pending))


_prepared: tuple[object, Callable] | None = None  # a Ray worker process's (context id, setup(context))


def _serve(connection: Connection, setup: Setup, context: Any) -> None:
    """One local worker process: prepare once, then answer each item on the pipe in turn until told to stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the driver handles Ctrl-C and keeps what is complete
    # The locks a task makes (tqdm makes one for its bars, even disabled ones) are then unlinked as soon as made, as
    # under fork: as the fork server context's named semaphores, a worker that close() terminates mid-task would
    # leave them to the resource tracker, which reports them as leaked after the driver's last line.
    multiprocessing.set_start_method("fork", force=True)
    try:
        run, failure = setup(context), None
    except Exception as err:  # told to the driver with the first item, which names it
        run, failure = None, err
    while True:
        try:
            item = connection.recv()
        except EOFError:  # the driver is gone
            return
        if item is _STOP:
            return
        try:
            if failure is not None:
                raise failure
            answer = (True, run(item))
        except Exception as err:
            answer = (False, _portable(err))
        connection.send(answer)


def _portable(err: Exception) -> tuple[str, Exception | None]:
    """A task's failure as the driver receives it: its line, and the exception itself where it survives pickling
    (so the caller can still tell, say, a failed write from a failed task)."""
    line = f"{type(err).__name__}: {first_line(err)}"
    try:
        return line, pickle.loads(pickle.dumps(err))
    except Exception:
        return line, None


_STOP = None  # what the driver sends a worker to end it; items are never None


@dataclass
class _Worker:
    process: BaseProcess
    connection: Connection
    tickets: collections.deque[int]  # the items it holds, oldest first: it answers in that order


class _Processes:
    """Local processes forked from a fork server (a fresh interpreter that imported the run's modules once, so no
    worker inherits the driver's threads or state, and N workers cost one import of torch, not N), one pipe each,
    driven from the caller's thread alone. ProcessPoolExecutor reads results in a thread of its own, which waits
    forever (and holds the interpreter's exit) on a result a worker was ended halfway through sending."""

    def __init__(self, setup: Setup, context: Any, workers: int) -> None:
        self.setup, self.context, self.size = setup, context, workers
        self.workers: list[_Worker] = []  # started as items need them, up to `size`
        self.tickets = itertools.count()
        self.server = multiprocessing.get_context("forkserver")
        # what the server imports before it forks: the setup's module, and with it the heavy ones (torch, the env);
        # read when this process first starts the server, which then serves every later run of this process too
        self.server.set_forkserver_preload([__name__, setup.__module__])

    def _start(self) -> _Worker:
        # The server starts with SIGINT blocked (the mask is inherited; held here only while it starts), and so does
        # every worker it forks: a Ctrl-C to the terminal's group while the server imports, or before _serve ignores
        # SIGINT, is no traceback of theirs. The resource tracker first: starting it unblocks SIGINT.
        multiprocessing.resource_tracker.ensure_running()
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT])
        try:
            multiprocessing.forkserver.ensure_running()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        ours, theirs = self.server.Pipe()
        # a daemon, as multiprocessing.Pool's workers: ended with the driver, whatever state it leaves them in (so a
        # task cannot start processes of its own; none of ours does)
        process = self.server.Process(target=_serve, args=(theirs, self.setup, self.context), daemon=True)
        process.start()  # waits for the server's imports the first time: a Ctrl-C meanwhile is noted, then acted on
        theirs.close()  # the worker holds the only other end: its death ends our reads
        self.workers.append(_Worker(process, ours, collections.deque()))
        return self.workers[-1]

    def _holder(self, ticket: int) -> _Worker:
        return next(worker for worker in self.workers if ticket in worker.tickets)

    def submit(self, item: Any) -> int:
        idle = min(self.workers, key=lambda each: len(each.tickets), default=None)
        worker = idle if idle is not None and (not idle.tickets or len(self.workers) == self.size) else self._start()
        ticket = next(self.tickets)
        try:
            worker.connection.send(item)
        except OSError:
            raise _worker_gone() from None
        worker.tickets.append(ticket)
        return ticket

    def first_done(self, pending: dict[int, Any]) -> int:
        # a worker that answered, or died (its read then says so)
        busy = {handle: worker for worker in self.workers if worker.tickets
                for handle in (worker.connection, worker.process.sentinel)}
        ready = _wait(list(busy))
        return busy[ready[0]].tickets[0]

    def result(self, ticket: int, name: str) -> Any:
        worker = self._holder(ticket)
        assert worker.tickets[0] == ticket, "a worker answers its items in order"
        _wait([worker.connection, worker.process.sentinel])
        try:
            ok, value = worker.connection.recv()
        except (EOFError, OSError):
            raise _worker_gone() from None
        worker.tickets.popleft()
        if not ok:
            line, cause = value
            raise Stopped(f"{name} failed: {line}") from cause
        return value

    def close(self, pending: list[int]) -> None:
        # a worker cannot stop a running item: with work left over, end the workers rather than wait for results
        # nobody will read; otherwise let each finish and leave
        for worker in self.workers:
            if pending:
                worker.process.terminate()
            else:
                with contextlib.suppress(OSError):
                    worker.connection.send(_STOP)
        for worker in self.workers:
            worker.process.join()
            worker.connection.close()


def _wait(objects: list) -> list:
    """multiprocessing's wait with a safe point every INTERRUPT_POLL_S: a Ctrl-C noted while a long task runs (a
    judge job takes minutes) is acted on at once, not when the task ends."""
    while not (ready := multiprocessing.connection.wait(objects, timeout=INTERRUPT_POLL_S)):
        interrupts.check()
    return ready


def _ray_run(setup: Setup, box: list, item: Any) -> Any:
    """One Ray task: the worker process prepares the run's context once (box[0], an object ref), then reuses it."""
    global _prepared
    import ray

    if _prepared is None or _prepared[0] != box[0].hex():
        _prepared = (box[0].hex(), setup(ray.get(box[0])))
    return _prepared[1](item)


def _token_at_hand() -> bool:
    """Whether a Ray authentication token is set for this user (where Ray itself looks for one)."""
    return bool(os.environ.get("RAY_AUTH_TOKEN")) or Path(
        os.environ.get("RAY_AUTH_TOKEN_PATH", Path.home() / ".ray" / "auth_token")).is_file()


def _unreachable(address: str) -> str | None:
    """Why nothing accepts a connection at a HOST:PORT address (None: something does, or the address has another
    form). Ray's own connect retries a silent address for many minutes before it fails."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return None
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=RAY_CONNECT_S).close()
    except OSError as err:
        return err.strerror or str(err) or type(err).__name__
    return None


def git_info_excludes() -> list[str]:
    """The checkout's own ignore patterns beside .gitignore (.git/info/exclude), which Ray does not read: what git
    leaves out of the project stays out of the upload too."""
    try:
        lines = (CHECKOUT / ".git" / "info" / "exclude").read_text().splitlines()
    except OSError:
        return []
    return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]


class _Ray:
    """Ray tasks in a placement group of `workers` CPUs: exactly that many run at once, on any cluster."""

    def __init__(self, setup: Setup, context: Any, backend: Backend) -> None:
        address = backend.ray or os.environ.get("RAY_ADDRESS") or None  # None: a local Ray
        if address and "RAY_AUTH_MODE" not in os.environ and _token_at_hand():
            # `ray start` turns token authentication on where a token exists, but ray.init(address) does not look
            # for one, and Ray reads the mode once, on import: without this, this machine's cluster refuses us
            os.environ["RAY_AUTH_MODE"] = "token"
        import ray
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        self.ray = ray
        self.lost = False
        self.owned = not ray.is_initialized()
        if self.owned:
            # Ray ends a driver that has lost its cluster for 60 s, wherever it is (mid-write); this run notices by
            # itself (`_wait`) and saves what is complete, so it keeps Ray from ending it first
            os.environ.setdefault("RAY_gcs_rpc_server_reconnect_timeout_s", "86400")
            # a local Ray for the run is sized like the local pool, and its workers run at normal priority as the
            # pool's do (Ray nices them by default, which starves them on a busy machine)
            local = {"num_cpus": backend.workers, "_system_config": {"worker_niceness": 0}}
            # on a cluster, every task runs this very checkout's code (Ray uploads it once, leaving out .git, venvs
            # and what .gitignore names: data, runs), so no node needs a copy of the project, nor the same version.
            # Those excludes are ours, not Ray's defaults, which warn about each one on every run (lines on stderr
            # beside the run's own)
            os.environ.setdefault("RAY_OVERRIDE_RUNTIME_ENV_DEFAULT_EXCLUDES", "")
            cluster = {"runtime_env": {"working_dir": str(CHECKOUT), "excludes": [
                ".git", ".venv", "venv", "__pycache__", *git_info_excludes()]}}
            token = " (or, if it asks for a token, set RAY_AUTH_TOKEN to its `ray get-auth-token`)"

            def unreachable(reason: object) -> BadInput:
                return BadInput(f"cannot reach a Ray cluster at {address} ({reason}); start one with `ray start "
                                f"--head` or fix --ray{token if address else ''}")

            if address and (reason := _unreachable(address)) is not None:
                raise unreachable(reason)
            try:
                # "local": a Ray of its own even where `ray start` left one running on this machine, which
                # ray.init() would join otherwise
                # log_to_driver off: the cluster's own log lines (a raylet's complaint about its metrics agent,
                # seen on a cluster under load) would reach this command's stderr beside its one line; the tasks
                # print nothing a user needs (failures come back as their exceptions, progress through our bars)
                ray.init(address=address or "local", logging_level=logging.WARNING, log_to_driver=False,
                         **(cluster if address else local))
            except (ConnectionError, ValueError) as err:  # refused, or not an address Ray reads
                raise unreachable(err) from None
        self.group = placement_group([{"CPU": 1}] * backend.workers)
        if not self.group.wait(timeout_seconds=RAY_RESERVE_S):
            total = ray.cluster_resources().get("CPU", 0)
            self.close([])
            raise BadInput(f"the Ray cluster did not free {backend.workers} CPUs for --workers {backend.workers} in "
                           f"{RAY_RESERVE_S:.0f} s ({total:.0f} in all); lower --workers")
        self.box = [ray.put(context)]  # in a list, so each task receives the ref and resolves it only once
        self.task = ray.remote(_ray_run).options(
            num_cpus=1, max_retries=1, retry_exceptions=True,
            scheduling_strategy=PlacementGroupSchedulingStrategy(self.group))
        self.setup = setup

    def submit(self, item: Any) -> Any:
        return self.task.remote(self.setup, self.box, item)

    def _fetch(self, refs: list, value: bool) -> Any:
        """The first of `refs` to finish (its value, if `value`), fetched in a helper thread while this one asks the
        cluster every RAY_POLL_S whether it still answers: with the cluster dead, Ray's own calls wait forever."""
        answer: queue.Queue = queue.Queue()

        def fetch() -> None:
            try:
                ref = self.ray.wait(refs, num_returns=1)[0][0]
                answer.put((ref, self.ray.get(ref) if value else None, None))
            except Exception as err:  # handed to the caller's thread
                answer.put((None, None, err))

        threading.Thread(target=fetch, daemon=True).start()
        waited = 0.0
        while True:
            try:
                ref, result, error = answer.get(timeout=INTERRUPT_POLL_S)
                break
            except queue.Empty:
                interrupts.check()
                waited += INTERRUPT_POLL_S
                if waited < RAY_POLL_S:
                    continue
                waited = 0.0
                probe = threading.Thread(target=self.ray.cluster_resources, daemon=True)
                probe.start()
                probe.join(RAY_ANSWER_S)
                if probe.is_alive():
                    self.lost = True
                    raise Stopped(f"the Ray cluster stopped answering (nothing for {RAY_ANSWER_S:.0f} s)") from None
        if error is not None:
            raise error
        return result if value else ref

    def first_done(self, pending: dict) -> Any:
        return self._fetch(list(pending), value=False)

    def result(self, ref: Any, name: str) -> Any:
        errors = self.ray.exceptions
        try:
            return self._fetch([ref], value=True)
        except errors.RayTaskError as err:
            cause = err.cause if err.cause is not None else err
            raise Stopped(f"{name} failed twice: {type(cause).__name__}: {cause}") from None
        except (errors.RayError, ConnectionError) as err:
            self.lost = True
            raise Stopped(f"the Ray workers or cluster were lost ({first_line(err)})") from None

    def close(self, pending: list) -> None:
        from ray.util.placement_group import remove_placement_group

        if self.lost:
            return  # every call would wait for the dead cluster
        for ref in pending:
            self.ray.cancel(ref, force=True)
        remove_placement_group(self.group)
        if self.owned:
            self.ray.shutdown()
