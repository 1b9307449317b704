"""A deterministic discrete-event simulator of a RocketMQ 4.x consumer group under faults.

It composes a master broker (offset manager, lock manager, send-back and schedule delivery), an
optional slave that replays the master `slave_lag_ms` behind (pulls reach it when the master
suggests it, CODE-6), a producer, and N push consumers of one group — each a real
`ClientConsumer` (pull service, flow control, concurrent or orderly consume service, offset store
with its 5 s persist cadence, rebalance) on its own client instance — all on one virtual clock.
Faults are explicit steps (`reference.sim.faults`). One `SimConfig` (its seed and schedule)
fully determines a run: every random choice comes from `random.Random` seeded from it.

It lives in `reference` because it is built only from reference parts and its history is the
reference model's behaviour; the conformance suite and the CLI only drive it.

A *step* is one event of the world's scheduler (a client's or a broker's task, a pull arriving
or answered, a produce, a scheduled restart) or one fault step; `run(n)` takes n steps. Every
step's effects are recorded in a history (`reference.sim.history`) checked as it grows
(`reference.sim.checker`). `finish()` runs the quiet tail — no more faults, no more produces,
until the group has settled — and then judges the run, liveness included.

Another implementation's parts can stand in for the reference's (`SimHooks.parts`,
`reference.sim.parts`); the history is observed the same way.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import random
import time
from collections.abc import Callable, Iterator

from pullspec.reference.scheduler import Scheduler
from pullspec.reference.sim import history as h
from pullspec.reference.sim.apply import apply_fault
from pullspec.reference.sim.checker import Checker, CheckResult
from pullspec.reference.sim.client import SimClient
from pullspec.reference.sim.cluster import (
    DelayingRemoting,
    RecordingStore,
    build_brokers,
    expire_oldest_files,
)
from pullspec.reference.sim.config import SimConfig, SimResult
from pullspec.reference.sim.faults import FaultStep, fault_stream, format_schedule
from pullspec.reference.sim.hooks import SimHooks
from pullspec.spec.clock import ManualClock
from pullspec.spec.consumer_config import ConsumeFromWhere, ConsumeMode, ConsumerConfig
from pullspec.spec.message import (
    PROPERTY_REAL_TOPIC,
    PROPERTY_UNIQ_KEY,
    BrokerInnerMessage,
    MessageQueue,
    StoredMessage,
    retry_topic_name,
)

#: Steps of quiet tail between two checks of whether every message is accounted for.
DRAIN_CHECK_EVERY = 50


class Simulator:
    """The world of one run; `run(steps)` drives it, `finish()` checks it."""

    group = "G"
    topic = "T"

    def __init__(
        self, config: SimConfig, hooks: SimHooks | None = None, *, keep_history: bool = True
    ) -> None:
        self.config = config
        self.hooks = hooks or SimHooks()
        self.history = h.History(keep=keep_history)
        self.checker = Checker()
        self.clock = ManualClock(0)
        self.scheduler = Scheduler(self.clock)
        self.remoting = DelayingRemoting(
            self.scheduler, config.latency_ms, random.Random(f"{config.seed}:network")
        )
        self.steps = 0
        #: Steps of the quiet tail (not counted in `steps`), and when it began (None: not yet).
        self.tail_steps = 0
        self.quiet_at: int | None = None
        #: The latest time a timed fault ends (a restart, a resume, a broker back up).
        self.settled_at = 0
        #: (client, via) of the broker commits being made, None for a pull's commit.
        self.writer: tuple[str, str] | None = None
        self.capture: list[str] | None = None
        self.pull_commits: dict[str, dict[int, str]] = {}
        self.broker_offsets: dict[str, int] = {}
        self.min_offsets: dict[str, int] = {}
        #: queue → (commit-log offset, queue offset) of each record still on disk, in order.
        self.physical: dict[str, list[tuple[int, int]]] = {}
        self.copy_keys: dict[tuple[str, int], str] = {}
        self.clients: dict[str, SimClient] = {}
        self.incarnations: dict[str, int] = {}
        self.applied: list[FaultStep] = []
        self._pq_ids = itertools.count(1)
        self._rng = random.Random(f"{config.seed}:world")
        self._producing = False
        self._produce_on = True
        self._produced = 0
        #: Keys of the poison messages.
        self.poison: set[str] = set()
        self._faults: list[tuple[int, int, FaultStep]] = []
        self._fault_seq = itertools.count()
        self._stream: Iterator[FaultStep] | None = None
        self.consumer_config = ConsumerConfig(
            consume_mode=ConsumeMode.ORDERLY if config.orderly else ConsumeMode.CONCURRENTLY,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            pull_threshold_for_queue=config.pull_threshold_for_queue,
            pull_batch_size=config.pull_batch_size,
            consume_message_batch_max_size=config.consume_batch_size,
            max_reconsume_times=config.max_reconsume_times,
            consume_timeout=config.consume_timeout_min,
            consume_concurrently_max_span=config.max_span,
        )
        self._build_brokers()
        self.emit(
            h.Setup(
                at=0,
                profile=config.profile.value,
                group=self.group,
                topics=(self.topic,),
                orderly=config.orderly,
                consumers=config.consumers,
                retry_queue_nums=config.retry_queue_nums,
                client_lock_ms=self.hooks.client_lock_ms,
                broker_lock_ms=self.hooks.broker_lock_ms,
                seed=config.seed,
                faults=config.faults,
                max_reconsume_times=config.max_reconsume_times,
                pull_threshold_for_queue=config.pull_threshold_for_queue,
                pull_batch_size=config.pull_batch_size,
                max_span=config.max_span,
                persist_interval_ms=self.consumer_config.persist_consumer_offset_interval,
                queues=config.queues,
            )
        )
        for i in range(config.consumers):
            self._start_client(f"c{i}")
        if config.schedule is not None:
            for step in config.schedule:
                self.inject(step)
        else:
            self._stream = fault_stream(
                config.seed, config.consumers, config.faults, config.mean_fault_gap_ms
            )
            self._pull_stream()
        self.scheduler.call_later(self._gap(), self._produce, "producer")

    # -- the brokers ----------------------------------------------------------------------------

    def _build_brokers(self) -> None:
        brokers = build_brokers(
            self.config,
            self.hooks.store_class(),
            self.hooks.broker_lock_ms,
            self.clock,
            self.remoting,
            self.group,
            self.topic,
            on_append=self._on_append,
            on_lease=self._on_lease,
            on_commit=self._on_broker_commit,
        )
        self.master, self.slave = brokers.master, brokers.slave
        self.lease_clock, self.master_addr = brokers.lease_clock, brokers.master_addr

    def queues(self) -> list[str]:
        """The consumable queues: the topic's and the group's retry topic's."""
        retry = [
            h.queue_name(retry_topic_name(self.group), i)
            for i in range(self.config.retry_queue_nums)
        ]
        return [h.queue_name(self.topic, i) for i in range(self.config.queues)] + retry

    # -- history --------------------------------------------------------------------------------

    def emit(self, event: h.Event) -> None:
        """Record one event and check it."""
        self.history.add(event)
        self.checker.feed(event)

    def key_of(self, queue: str, offset: int) -> str:
        """The key of the message stored at (queue, offset) ("" when unknown)."""
        return self.copy_keys.get((queue, offset), "")

    def next_pq_id(self) -> int:
        """A ProcessQueue number unique in the run."""
        return next(self._pq_ids)

    def _on_append(self, record: StoredMessage) -> None:
        key = record.get_property(PROPERTY_UNIQ_KEY)
        if key is None:
            return  # a broker's own record (OFFSET_MOVED_EVENT)
        queue = h.queue_name(record.topic, record.queue_id)
        self.copy_keys[(queue, record.queue_offset)] = key
        self.physical.setdefault(queue, []).append((record.commitlog_offset, record.queue_offset))
        if self.capture is not None:
            self.capture.append(record.topic)
        if not self._producing:  # the producer reports its own sends
            self.emit(
                h.Stored(
                    at=self.clock.now_ms(),
                    key=key,
                    topic=record.topic,
                    queue_id=record.queue_id,
                    offset=record.queue_offset,
                    reconsume_times=record.reconsume_times,
                    real_topic=record.get_property(PROPERTY_REAL_TOPIC) or "",
                )
            )

    def _on_broker_commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        queue = h.queue_name(topic, queue_id)
        before = self.broker_offsets.get(queue)
        self.broker_offsets[queue] = offset
        if self.writer is not None:
            client, via = self.writer
        else:
            client, via = self.pull_commits.get(queue, {}).get(offset, "?"), "pull"
        self.emit(
            h.BrokerCommit(
                at=self.clock.now_ms(),
                client=client,
                queue=queue,
                offset=offset,
                before=before,
                via=via,
            )
        )

    def _on_lease(self, client_id: str, mq: MessageQueue, action: str) -> None:
        queue = h.queue_name(mq.topic, mq.queue_id)
        self.emit(h.Lease(at=self.clock.now_ms(), client=client_id, queue=queue, action=action))

    # -- producing ------------------------------------------------------------------------------

    def _gap(self) -> int:
        return self._rng.randrange(1, 2 * self.config.produce_gap_ms)

    def _produce(self) -> None:
        if not self._produce_on:
            return  # the quiet tail: the producer has stopped
        self._produced += 1
        if self._rng.random() < self.config.poison_rate:
            self.poison.add(f"k{self._produced}")
        msg = BrokerInnerMessage(
            self.topic,
            self._rng.randrange(self.config.queues),
            f"m{self._produced}".encode(),
            {PROPERTY_UNIQ_KEY: f"k{self._produced}"},
            born_timestamp=self.clock.now_ms(),
        )
        self._producing = True
        try:
            result = self.remoting.send_message(self.master_addr, msg)
        except Exception:
            result = None  # the broker is down: the send fails and the message never exists
        finally:
            self._producing = False
        if result is not None and result.ok:
            key = f"k{self._produced}"
            self.copy_keys[(h.queue_name(self.topic, msg.queue_id), result.queue_offset)] = key
            self.emit(
                h.Produce(
                    at=self.clock.now_ms(),
                    key=key,
                    topic=self.topic,
                    queue_id=msg.queue_id,
                    offset=result.queue_offset,
                    poison=key in self.poison,
                )
            )
        self.scheduler.call_later(self._gap(), self._produce, "producer")

    # -- consumers ------------------------------------------------------------------------------

    def _start_client(self, name: str) -> SimClient:
        self.incarnations[name] = self.incarnations.get(name, 0) + 1
        client = SimClient(self, name, self.incarnations[name])
        self.clients[name] = client
        client.start()
        return client

    def _live(self, name: str) -> SimClient | None:
        client = self.clients.get(name)
        return client if client is not None and client.alive else None

    # -- faults ---------------------------------------------------------------------------------

    def inject(self, step: FaultStep) -> None:
        """Schedule a fault step (at its time, or now if that has passed)."""
        heapq.heappush(self._faults, (step.at, next(self._fault_seq), step))

    def _pull_stream(self) -> None:
        # Keep one generated step queued ahead, so the stream is drawn only as time passes.
        if self._stream is not None:
            nxt = next(self._stream, None)
            if nxt is not None:
                self.inject(nxt)

    def _apply(self, step: FaultStep) -> None:
        self.applied.append(step)
        apply_fault(self, step)

    def later(self, delay_ms: int, action: Callable[[], None], name: str) -> None:
        """A simulator action `delay_ms` from now (a restart, a resume, a repair)."""
        self.hold_until(self.clock.now_ms() + delay_ms)
        self.scheduler.call_later(delay_ms, action, f"sim: {name}")

    def hold_until(self, at: int) -> None:
        """A timed fault lasts until `at`: the quiet tail starts counting after it."""
        self.settled_at = max(self.settled_at, at)

    def expire(self, files: int) -> None:
        """Expire the oldest commit-log files; report, per queue, the queue offset below which
        every record is gone. That is not the queue's min offset: the consume queue's own
        correction only looks at its first file (STORE-19), so a queue whose surviving entries
        all point into deleted files keeps its min and answers MESSAGE_WAS_REMOVING."""
        store = self.master.store
        assert isinstance(store, RecordingStore)
        expire_oldest_files(store, files)
        physical_min = store.get_min_phy_offset()
        for queue, records in self.physical.items():
            gone = bisect.bisect_left(records, (physical_min, -1))
            if gone == 0:
                continue
            below = records[gone - 1][1] + 1
            del records[:gone]
            if below > self.min_offsets.get(queue, 0):
                self.min_offsets[queue] = below
                self.emit(h.Truncated(at=self.clock.now_ms(), queue=queue, min_offset=below))

    # -- running --------------------------------------------------------------------------------

    def step(self) -> None:
        """Take one step: the next fault if it is due first, else the next scheduled event."""
        self._advance()
        self.steps += 1

    def _advance(self) -> None:
        due = self.scheduler.next_time
        if self._faults and (due is None or self._faults[0][0] <= due):
            at, _seq, fault = heapq.heappop(self._faults)
            if at > self.clock.now_ms():
                self.clock.jump_to(at)
            self._apply(fault)
            self._pull_stream()
        else:
            self.scheduler.run_next()
        for client in self.clients.values():
            client.poll()

    def run(
        self, steps: int, progress: Callable[[int, int], None] | None = None, every: int = 10_000
    ) -> None:
        """Take `steps` steps; `progress(steps, virtual ms)` is called every `every` steps."""
        for i in range(1, steps + 1):
            self.step()
            if progress is not None and i % every == 0:
                progress(i, self.clock.now_ms())

    def snapshot(self) -> h.Snapshot:
        """The end state the checker judges loss against."""
        committed, max_offsets = {}, {}
        for queue in self.queues():
            topic, qid = h.split_queue_name(queue)
            committed[queue] = self.master.query_offset(self.group, topic, qid)
            max_offsets[queue] = self.master.store.get_max_offset_in_queue(topic, qid)
        cached = {c.client_id: c.cached() for c in self.clients.values() if c.alive}
        return h.Snapshot(
            at=self.clock.now_ms(), committed=committed, max_offsets=max_offsets, cached=cached
        )

    def quiet(self) -> None:
        """Run the quiet tail (once): drop the faults still to come (and the effects of those
        applied that have not struck yet), stop the producer, start a consumer if none is
        alive, and run until every message is consumed, dead-lettered or gone, or until
        `quiet_tail_ms` after the last timed fault ends (a restart, a resume), or for
        `quiet_tail_steps` steps. Liveness is judged against the end of the tail."""
        cfg = self.config
        if self.quiet_at is not None or cfg.quiet_tail_ms <= 0:
            return
        now = self.quiet_at = self.clock.now_ms()
        self._faults.clear()
        self._stream = None
        self._produce_on = False
        for client in self.clients.values():
            client.calm()
        started: tuple[str, ...] = ()
        if not any(c.alive for c in self.clients.values()):
            name = f"c{len(self.clients)}"
            started = (self._start_client(name).client_id,)
        until = max(now, self.settled_at) + cfg.quiet_tail_ms
        self.emit(h.Quiet(at=now, until=until, started=started))
        while self.tail_steps < cfg.quiet_tail_steps:
            due = self.scheduler.next_time
            if due is None or due > until:
                break
            self._advance()
            self.tail_steps += 1
            if self.tail_steps % DRAIN_CHECK_EVERY == 0 and self._drained():
                break

    def _drained(self) -> bool:
        return self.clock.now_ms() >= self.settled_at and not self.checker.unresolved()

    def finish(self) -> CheckResult:
        """Run the quiet tail, record the end state and return the checker's verdict."""
        self.quiet()
        self.emit(self.snapshot())
        return self.checker.finish()

    def schedule_text(self) -> str:
        """The fault steps applied so far, as `--schedule` text."""
        return format_schedule(self.applied)

    def replay_command(self, steps: int | None = None) -> str:
        """The `pullspec simulate` command line that replays this run."""
        steps = steps if steps is not None else self.steps
        return self.replay_of(self.config, steps, self.schedule_text())

    @staticmethod
    def replay_of(cfg: SimConfig, steps: int, schedule: str, impl: str | None = None) -> str:
        """The `pullspec simulate` command line that replays `steps` steps of `cfg` with the
        fault steps `schedule` (and, with `impl`, that candidate's parts)."""
        parts = [
            "pullspec simulate",
            f"--seed {cfg.seed}",
            f"--steps {steps}",
            f"--consumers {cfg.consumers}",
            f"--profile {cfg.profile.value}",
        ]
        if cfg.orderly:
            parts.append("--orderly")
        if not cfg.slave:
            parts.append("--no-slave")
        if impl is not None:
            parts.append(f"--impl {impl}")
        parts.append(f'--schedule "{schedule}"')
        return " ".join(parts)


def simulate(
    config: SimConfig,
    steps: int,
    *,
    hooks: SimHooks | None = None,
    keep_history: bool = False,
    progress: Callable[[int, int], None] | None = None,
    every: int = 10_000,
) -> tuple[SimResult, Simulator]:
    """Run `steps` steps of a new simulator and check it."""
    started = time.perf_counter()
    sim = Simulator(config, hooks, keep_history=keep_history)
    sim.run(steps, progress, every)
    check = sim.finish()
    result = SimResult(
        check,
        sim.steps,
        sim.clock.now_ms(),
        time.perf_counter() - started,
        sim.history.summary(),
        sim.schedule_text(),
        sim.tail_steps,
    )
    return result, sim


__all__ = ["SimConfig", "SimHooks", "SimResult", "Simulator", "simulate"]
