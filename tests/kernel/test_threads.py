"""The emulation's thread primitives: the weighted semaphore gives up the right waiter."""

from __future__ import annotations

import threading

from ctsim.kernel.threads import Clock, ThreadSemaphore


def test_a_waiter_that_gives_up_leaves_its_equal_in_the_queue() -> None:
    """Two waiters of the same weight: the later gives up first; the earlier is still granted on release.

    With waiters stored as equal lists, ``deque.remove`` took the first equal one, the earlier waiter: it then
    waited out its own give-up time though the slot came free, and the one that gave up kept a place.
    """
    clock = Clock()
    sem = ThreadSemaphore(clock, 1)
    assert sem.acquire(1, give_up_at=10.0)  # held: both waiters queue behind it
    outcome: dict[str, tuple[bool, float]] = {}

    def wait(name: str, give_up_at: float, entered: threading.Event) -> None:
        got = sem.acquire(1, give_up_at, entered=entered.set)
        outcome[name] = (got, clock.now())

    first_in, second_in = threading.Event(), threading.Event()
    first = threading.Thread(target=wait, args=("first", 30.0, first_in))
    first.start()
    assert first_in.wait(5)
    second = threading.Thread(target=wait, args=("second", clock.now() + 0.2, second_in))
    second.start()
    assert second_in.wait(5)
    second.join(5)
    assert outcome["second"][0] is False  # gave up at its time
    released = clock.now()
    sem.release(1)
    first.join(5)
    assert not first.is_alive()
    got, at = outcome["first"]
    assert got and at - released < 2.0, outcome  # granted on the release, not at its own give-up time
    assert sem._cur == 1 and not sem._waiters


def test_a_thread_that_dies_stops_the_node_and_fails_the_command() -> None:
    """An emulated agent thread's exception is kept and stops the node; ctsim emulate then exits 1 in one line."""
    import subprocess
    import sys
    import threading
    from types import SimpleNamespace

    from ctsim.kernel.emulated_node import EmulatedNode

    node = SimpleNamespace(_count_lock=threading.Lock(), failure=None, stop=threading.Event())

    def pod_worker() -> None:
        raise ValueError("[2500000, False] is not in deque")

    EmulatedNode._guard(node, pod_worker)  # type: ignore[arg-type]
    assert node.stop.is_set() and node.failure == "pod_worker: ValueError: [2500000, False] is not in deque"
    EmulatedNode._guard(node, lambda: (_ for _ in ()).throw(KeyError("later")))  # type: ignore[arg-type]
    assert node.failure.startswith("pod_worker")  # the first death is the one said
    code = (
        "import sys; from ctsim.cli.command import run_cli; from ctsim.core.errors import WorkFailed\n"
        "def app(standalone_mode): raise WorkFailed('an emulated agent thread died')\n"
        "run_cli(app, 'ctsim')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 1 and out.stderr == "ctsim: error: an emulated agent thread died\n"


def test_a_stopped_process_counts_its_stall() -> None:
    """``StallWatch`` measures time the process really could not run: SIGSTOP it for 0.4 s, and 0.4 s is counted.

    Ordinary wake-ups (under ``StallWatch.MIN``) count nothing, so an idle second reads ~0.
    """
    import json
    import os
    import signal
    import subprocess
    import sys
    import time

    code = (
        "import json, threading, sys\n"
        "from ctsim.kernel.threads import StallWatch\n"
        "w, stop = StallWatch(), threading.Event()\n"
        "t = threading.Thread(target=w.run, args=(stop,)); t.start()\n"
        "print('up', flush=True); sys.stdin.readline(); stop.set(); t.join()\n"
        "print(json.dumps([w.stalled_s, w.worst_s]), flush=True)\n"
    )

    def watched(stall: float) -> tuple[float, float]:
        p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert p.stdout is not None and p.stdin is not None
            assert p.stdout.readline() == "up\n"
            time.sleep(0.3)
            if stall:
                os.kill(p.pid, signal.SIGSTOP)
                time.sleep(stall)
                os.kill(p.pid, signal.SIGCONT)
            time.sleep(0.3)
            out, _ = p.communicate("\n", timeout=10)
        finally:
            p.kill()
            p.wait()
        stalled, worst = json.loads(out)
        return stalled, worst

    stalled, worst = watched(0.4)
    assert 0.35 <= stalled <= 0.6 and 0.35 <= worst <= stalled, (stalled, worst)
    stalled, _ = watched(0.0)
    assert stalled < 0.1, stalled
