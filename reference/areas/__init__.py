"""The reference candidate's drivers of the client conformance areas.

A client area (`pull_decision`, `pull_result`, `pull_request`, `pull_service`, `offset_store`,
`allocate`, `rebalance`, `consume_concurrently`, `consume_orderly`,
`process_queue_maintenance`, `pull_loop`) is checked through ops and observations in the
vectors' JSON vocabulary (docs/protocol.md). Any candidate implements one by a factory named
after the area, ``candidate.<area>(config, profile) -> driver`` whose driver answers
``apply(op, args) -> observation`` (`conformance.candidates.AreaDriver`); a `cmd:` candidate
receives the same ops over the subprocess protocol.

These are the reference's drivers, one `Driver` class in a module named after its area
(`reference.factories.<area>` builds it): each builds the reference's own classes —
`ReferencePushConsumer`, `ReferenceRebalancePushImpl`, the consume services, the offset stores,
`PullMessageService`, `ReferenceProcessQueue` — around stand-ins for what lies outside the area (a
scripted broker, a recording send-back client, a listener that answers what the op says) and runs
each op on them, the way the recorded client vectors were produced from RocketMQ's own classes. An op that states one rule in isolation (a range check,
a timetable) calls the rule the reference class calls.

Example::

    from pullspec.reference import factories
    driver = factories.pull_decision({"pullThresholdForQueue": 1000}, Profile.V4_9)
    driver.apply("attempt", {"processQueue": {"msgCount": 1001}})["action"]
    # {'kind': 'DELAY', 'delayMs': 50, 'reason': 'CACHE_COUNT'}
"""
