"""``jobrun worker --processes N``: one supervisor process and N worker processes.

One Python process runs one event loop on one core; a host with more cores
runs more workers. The :class:`Supervisor` starts N children, each an ordinary
``python -m jobrun worker`` with the same options (``--processes 1``), and:

* forwards SIGTERM and SIGINT to every child, then waits for them: each
  child shuts down gracefully on its own (stop claiming, let running jobs
  finish within ``--shutdown-grace``, hand the rest back). A second signal is
  forwarded too, and stops the children at once. A child still alive
  ``kill_after`` past the grace period is killed.
* restarts a child that exits while the supervisor is not stopping, after a
  backoff that doubles from ``restart_delay`` up to ``max_restart_delay`` for
  a slot whose child keeps dying, and starts again from ``restart_delay``
  once a child has lived ``stable_after``. Every exit and restart is logged.
* exits, once stopped, with the children's status: 0 when every child exited
  0, else the worst child's status (``128 + signal`` for a child killed by a
  signal). A slot whose child had died and was waiting to be restarted when
  the stop came has no child to stop; it is left empty and counts as 0.

Children run in their own process group, so a Ctrl-C in a terminal reaches
them once, through the supervisor, rather than twice (a worker treats a
second signal as "stop at once"). The scheduler and the maintenance service
are leader-elected through an advisory lock, so every child may run them
(``--scheduler``): one child leads, the others stand by and take over when
it dies.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import FrameType

__all__ = ["Supervisor", "exit_status"]

log = logging.getLogger("jobrun.supervisor")

_TICK = 0.1


def exit_status(returncode: int) -> int:
    """A child's return code as a shell exit status (``128 + n`` for death by signal n)."""
    return 128 - returncode if returncode < 0 else returncode


@dataclass
class _Slot:
    index: int
    proc: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    delay: float = 0.0
    restart_at: float | None = None
    last_status: int = 0


@dataclass
class Supervisor:
    """Run ``processes`` children built by ``command`` until SIGTERM or SIGINT.

    ``command(i)`` is the argv of child ``i`` (0-based), ``env`` the
    environment of every child or ``env(i)`` child ``i``'s. ``grace`` is the
    children's own shutdown grace: a child still running ``grace +
    kill_after`` seconds after the stop signal is killed.
    """

    command: Callable[[int], Sequence[str]]
    processes: int
    env: dict[str, str] | Callable[[int], dict[str, str]] | None = None
    grace: float = 30.0
    kill_after: float = 10.0
    restart_delay: float = 0.5
    max_restart_delay: float = 30.0
    stable_after: float = 30.0
    _slots: list[_Slot] = field(default_factory=list, init=False)
    _stop_signals: list[int] = field(default_factory=list, init=False)

    def run(self) -> int:
        """Start the children, supervise them until stopped; return the exit status."""
        if self.processes < 1:
            raise ValueError(f"processes must be at least 1, got {self.processes}")
        previous = {
            sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGTERM, signal.SIGINT)
        }
        try:
            self._slots = [_Slot(i, delay=self.restart_delay) for i in range(self.processes)]
            for slot in self._slots:
                self._start(slot)
            log.info("supervisor %d started %d worker processes", os.getpid(), self.processes)
            forwarded = 0
            stop_began: float | None = None
            while True:
                if len(self._stop_signals) > forwarded:
                    for sig in self._stop_signals[forwarded:]:
                        self._forward(sig)
                    forwarded = len(self._stop_signals)
                    if stop_began is None:
                        stop_began = time.monotonic()
                        self._cancel_restarts()
                if stop_began is not None:
                    if all(s.proc is None or s.proc.poll() is not None for s in self._slots):
                        break
                    if time.monotonic() - stop_began > self.grace + self.kill_after:
                        self._kill_all()
                else:
                    self._reap_and_restart()
                time.sleep(_TICK)
            for slot in self._slots:
                if slot.proc is not None:
                    slot.last_status = exit_status(slot.proc.wait())
            status = max(slot.last_status for slot in self._slots)
            log.info("supervisor %d stopped; exit status %d", os.getpid(), status)
            return status
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self._kill_all()

    def _cancel_restarts(self) -> None:
        """A slot waiting out its restart delay has no child to stop: it stays empty.

        Its child's exit was logged when it happened and answered with the
        restart the stop now cancels; it is not a child that failed to stop,
        so it does not make the supervisor's exit status.
        """
        for slot in self._slots:
            if slot.restart_at is not None:
                log.info("worker process %d: restart cancelled by the stop", slot.index)
                slot.restart_at = None
                slot.proc = None
                slot.last_status = 0

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._stop_signals.append(signum)

    def _start(self, slot: _Slot) -> None:
        env = self.env(slot.index) if callable(self.env) else self.env
        slot.proc = subprocess.Popen(list(self.command(slot.index)), env=env, process_group=0)
        slot.started = time.monotonic()
        slot.restart_at = None
        log.info("worker process %d started (pid %d)", slot.index, slot.proc.pid)

    def _forward(self, sig: int) -> None:
        name = signal.Signals(sig).name
        log.info("supervisor got %s; forwarding it to the worker processes", name)
        for slot in self._slots:
            if slot.proc is not None and slot.proc.poll() is None:
                slot.proc.send_signal(sig)  # a no-op for a child that just exited

    def _kill_all(self) -> None:
        for slot in self._slots:
            if slot.proc is not None and slot.proc.poll() is None:
                log.warning("worker process %d (pid %d) killed", slot.index, slot.proc.pid)
                slot.proc.kill()

    def _reap_and_restart(self) -> None:
        now = time.monotonic()
        for slot in self._slots:
            if slot.restart_at is not None:
                if now >= slot.restart_at:
                    self._start(slot)
                continue
            assert slot.proc is not None
            code = slot.proc.poll()
            if code is None:
                continue
            slot.last_status = exit_status(code)
            if now - slot.started >= self.stable_after:
                slot.delay = self.restart_delay
            slot.restart_at = now + slot.delay
            log.warning(
                "worker process %d (pid %d) exited with status %d; restarting in %.1fs",
                slot.index,
                slot.proc.pid,
                slot.last_status,
                slot.delay,
            )
            slot.delay = min(slot.delay * 2, self.max_restart_delay)
