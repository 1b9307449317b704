"""What each fault step does to a running simulation (`reference.sim.faults` names them).

A fault on a consumer hits its current incarnation and is a no-op when that one is not alive
(a crash of a crashed consumer, a leave of one that left); a join of a consumer that is alive is
a no-op too. Timed faults (a crash's restart, a pause's resume, a broker coming back) schedule
their end as a simulator action, which is itself a step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from pullspec.reference.broker import ReferenceBroker
from pullspec.reference.sim import history as h
from pullspec.reference.sim.base import Run
from pullspec.reference.sim.client import SimClient
from pullspec.reference.sim.cluster import LaggingSlave, RecordingStore, SkewedClock
from pullspec.reference.sim.faults import FaultStep


class FaultTarget(Run, Protocol):
    """What a fault acts on: a run (`reference.sim.simulator.Simulator`) with its consumers and
    its brokers, and the actions that end a timed fault."""

    #: The current incarnation of each consumer, by name.
    clients: dict[str, SimClient]
    master: ReferenceBroker
    slave: LaggingSlave | None
    master_addr: str
    #: The clock only the broker's lock manager reads (a clock-jump fault moves it, LEASE-3).
    lease_clock: SkewedClock

    def _start_client(self, name: str) -> SimClient: ...

    def later(self, delay_ms: int, action: Callable[[], None], name: str) -> None:
        """A simulator action `delay_ms` from now (a restart, a resume, a repair)."""
        ...

    def hold_until(self, at: int) -> None:
        """A timed fault lasts until `at`: the quiet tail starts counting after it."""
        ...

    def expire(self, files: int) -> None:
        """Expire the oldest commit-log files."""
        ...


#: How long a pull-delay fault lasts.
PULL_DELAY_WINDOW_MS = 30_000
ClientFault = Callable[[FaultTarget, SimClient, int], None]
BrokerFault = Callable[[FaultTarget, int], None]


def apply_fault(sim: FaultTarget, step: FaultStep) -> None:
    """Apply `step` now and record it as a Fault event."""
    target = step.target
    client = sim.clients.get(target)
    alive = client is not None and client.alive
    detail = str(step.value) if step.value else ""
    kind = step.kind
    applied = True
    if kind == "join":
        applied = not alive
        if applied:
            client = sim._start_client(target)
    elif kind in _CLIENT_FAULTS:
        applied = alive
        if applied and client is not None:
            target = client.client_id  # the history names incarnations
            _CLIENT_FAULTS[kind](sim, client, step.value)
    else:
        _BROKER_FAULTS[kind](sim, step.value)
        target = "broker-a"
    if kind == "join" and client is not None:
        target = client.client_id
    sim.emit(
        h.Fault(
            at=sim.clock.now_ms(),
            fault=kind,
            target=target,
            detail=detail if applied else f"ignored {detail}".strip(),
        )
    )


def _crash(sim: FaultTarget, client: SimClient, value: int) -> None:
    client.crash()
    if value > 0:
        name = client.name

        def restart() -> None:
            current = sim.clients.get(name)
            if current is client:  # not re-joined meanwhile
                sim._start_client(name)
                sim.emit(
                    h.Fault(
                        at=sim.clock.now_ms(),
                        fault="restart",
                        target=sim.clients[name].client_id,
                    )
                )

        sim.later(value, restart, f"restart {name}")


def _leave(sim: FaultTarget, client: SimClient, value: int) -> None:
    client.leave()


def _pause(sim: FaultTarget, client: SimClient, value: int) -> None:
    client.consumer.suspend()

    def resume() -> None:
        if client.alive:
            client.consumer.resume()
            sim.emit(h.Fault(at=sim.clock.now_ms(), fault="resume", target=client.client_id))

    sim.later(max(value, 1), resume, f"resume {client.client_id}")


def _listener_fail(sim: FaultTarget, client: SimClient, value: int) -> None:
    client.fail_calls += max(value, 1)


def _listener_exception(sim: FaultTarget, client: SimClient, value: int) -> None:
    client.raise_calls += max(value, 1)


def _listener_slow(sim: FaultTarget, client: SimClient, value: int) -> None:
    client.slow.extend([value] * 3)


def _listener_stuck(sim: FaultTarget, client: SimClient, value: int) -> None:
    # The next call on the topic: its queue keeps moving, so the span grows past the held one.
    client.stuck.append(max(value, 1))


def _consume_timeout(sim: FaultTarget, client: SimClient, value: int) -> None:
    client.slow.insert(0, max(value, 1))  # the very next call, on any queue


def _pull_stall(sim: FaultTarget, client: SimClient, value: int) -> None:
    until = sim.clock.now_ms() + max(value, 1)
    client.consumer.instance.pull_service.block_until(until)
    sim.hold_until(until)


def _expire_behind(sim: FaultTarget, client: SimClient, value: int) -> None:
    # The consumer stops pulling (suspend, FLOW-4) while the others go on; just before it
    # resumes, the old commit-log files expire, so its cursors lie below its queues' new min
    # offsets while consumers a little behind still find their records.
    client.consumer.suspend()
    sim.later(max(value - 1_000, 1), lambda: _expire_old_files(sim), "expire")

    def resume() -> None:
        if client.alive:
            client.consumer.resume()
            sim.emit(h.Fault(at=sim.clock.now_ms(), fault="resume", target=client.client_id))

    sim.later(max(value, 1), resume, f"resume {client.client_id}")


def _expire_old_files(sim: FaultTarget) -> None:
    """Expire every commit-log file but the one being written — and the one before it while
    the current one is less than half full: a queue's min offset is corrected only from
    entries whose records survive (STORE-19), and a nearly empty file leaves none."""
    store = sim.master.store
    assert isinstance(store, RecordingStore)  # the simulation's master store
    size = store.config.mapped_file_size_commit_log
    top = store.get_max_phy_offset()
    files = top // size - max(store.get_min_phy_offset(), 0) // size + 1
    keep = 1 if top % size >= size // 2 else 2
    if files > keep:
        sim.expire(files - keep)


def _send_back(mode: str) -> ClientFault:
    def apply(sim: FaultTarget, client: SimClient, value: int) -> None:
        client.send_back_faults.extend([mode] * max(value, 1))

    return apply


def _expire(sim: FaultTarget, value: int) -> None:
    sim.expire(max(value, 1))


def _slave_lag(sim: FaultTarget, value: int) -> None:
    if sim.slave is not None:
        sim.slave.lag_ms = value


def _clock_jump(sim: FaultTarget, value: int) -> None:
    sim.lease_clock.skew += value


def _pull_drop(sim: FaultTarget, value: int) -> None:
    sim.remoting.set_drop_responses(sim.master_addr, True)
    sim.later(
        max(value, 1), lambda: sim.remoting.set_drop_responses(sim.master_addr, False), "answers"
    )


def _pull_delay(sim: FaultTarget, value: int) -> None:
    sim.remoting.delay_answers(value, PULL_DELAY_WINDOW_MS)


def _broker_down(sim: FaultTarget, value: int) -> None:
    sim.remoting.set_broker_down(sim.master_addr, True)
    sim.later(max(value, 1), lambda: sim.remoting.set_broker_down(sim.master_addr, False), "up")


_CLIENT_FAULTS: dict[str, ClientFault] = {
    "crash": _crash,
    "leave": _leave,
    "pause": _pause,
    "listener-fail": _listener_fail,
    "listener-exception": _listener_exception,
    "listener-slow": _listener_slow,
    "listener-stuck": _listener_stuck,
    "consume-timeout": _consume_timeout,
    "pull-stall": _pull_stall,
    "expire-behind": _expire_behind,
    "send-back-fail": _send_back("fail"),
    "send-back-lost": _send_back("lost"),
}
_BROKER_FAULTS: dict[str, BrokerFault] = {
    "expire": _expire,
    "slave-lag": _slave_lag,
    "clock-jump": _clock_jump,
    "pull-drop": _pull_drop,
    "pull-delay": _pull_delay,
    "broker-down": _broker_down,
}
