"""The client instance's side of rebalancing: the RebalanceService thread (REBAL-1) and a
`BrokerLockClient` that answers LOCK_BATCH_MQ / UNLOCK_BATCH_MQ from one lock manager per broker
(the broker's RebalanceLockManager, LEASE), with switches for a missing master or a broker the
client cannot reach."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from pullspec.reference.scheduler import Scheduler
from pullspec.spec import allocate as al
from pullspec.spec.client_errors import MQClientError
from pullspec.spec.lease import LockManager
from pullspec.spec.message import MessageQueue


class LockManagerClient:
    """BrokerLockClient over one lock manager per broker name (the broker's RebalanceLockManager
    answering LOCK_BATCH_MQ / UNLOCK_BATCH_MQ); tests make a broker masterless or unreachable."""

    def __init__(self, managers: Mapping[str, LockManager]) -> None:
        self.managers = dict(managers)
        #: Brokers whose master the route does not know (no RPC is sent).
        self.no_master: set[str] = set()
        #: Brokers whose RPCs fail (MQClientError), one-way ones included.
        self.unreachable: set[str] = set()

    def has_master(self, broker_name: str) -> bool:
        """findBrokerAddressInSubscribe(brokerName, MASTER_ID, true) found an address."""
        return broker_name in self.managers and broker_name not in self.no_master

    def _manager(self, broker_name: str) -> LockManager:
        if broker_name in self.unreachable or not self.has_master(broker_name):
            raise MQClientError(f"connect to {broker_name} failed")
        return self.managers[broker_name]

    def lock_batch(
        self, broker_name: str, group: str, client_id: str, mqs: Iterable[MessageQueue]
    ) -> set[MessageQueue]:
        """LOCK_BATCH_MQ: the granted queues (LEASE-6)."""
        return self._manager(broker_name).try_lock_batch(group, mqs, client_id)

    def unlock_batch(
        self,
        broker_name: str,
        group: str,
        client_id: str,
        mqs: Iterable[MessageQueue],
        oneway: bool,
    ) -> None:
        """UNLOCK_BATCH_MQ (LEASE-7)."""
        self._manager(broker_name).unlock_batch(group, mqs, client_id)


class ReferenceRebalanceService:
    """RebalanceService (REBAL-1): every client consumer's doRebalance, every waitInterval or
    as soon as rebalanceImmediately wakes it; one consumer's failure spares the others."""

    def __init__(self, scheduler: Scheduler, consumers: Iterable[Callable[[], None]] = ()) -> None:
        self.scheduler = scheduler
        self.consumers = list(consumers)
        self.runs: list[int] = []
        self.log: list[tuple[str, str]] = []
        self._pending: int | None = None
        self._last_end: int | None = None
        self._running = False
        #: When wakeup() came during a run: the next wait then returns at once (waitForRunning
        #: finds hasNotified set).
        self._woken_at: int | None = None

    def _schedule(self, at: int) -> None:
        if self._pending is not None:
            self.scheduler.cancel(self._pending)
        self._pending = self.scheduler.call_at(at, self._run, "rebalance")

    def start(self) -> None:
        """The thread starts by waiting waitInterval (consumers then wake it at their start)."""
        self._last_end = self.scheduler.clock.now_ms()
        self._schedule(al.next_rebalance_at(self._last_end, None))

    def rebalance_immediately(self) -> None:
        """wakeup(): the next run happens now, or right after the run in progress."""
        now = self.scheduler.clock.now_ms()
        if self._running:
            self._woken_at = now if self._woken_at is None else self._woken_at
            return
        self._schedule(
            al.next_rebalance_at(self._last_end if self._last_end is not None else now, now)
        )

    def shutdown(self) -> None:
        """Stop the thread: no further run."""
        if self._pending is not None:
            self.scheduler.cancel(self._pending)
        self._pending = None

    def _run(self) -> None:
        self._pending = None
        self.runs.append(self.scheduler.clock.now_ms())
        self._running = True
        try:
            for do_rebalance in self.consumers:
                try:
                    do_rebalance()
                except Exception as exc:
                    self.log.append(("error", f"doRebalance exception: {exc!r}"))
        finally:
            self._running = False
        self._last_end = self.scheduler.clock.now_ms()
        woken, self._woken_at = self._woken_at, None
        self._schedule(al.next_rebalance_at(self._last_end, woken))
