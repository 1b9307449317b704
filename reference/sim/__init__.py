"""The whole-system simulator and its checker (`pullspec simulate`, docs/narrative/anomalies.md).

`simulator.Simulator` runs a consumer group against a master (and optional slave) under a fault
schedule (`faults`, applied by `apply`) and records a `history`; `checker` reads the history once
and reports each anomaly, allowed (`causes`, `budget`) or not (`verdict`); `coverage` names the
rules a history reached. `config` holds a run's inputs and result, `cluster` the broker side,
`client`, `watch` and `observe` a consumer and what the simulator sees of it, `parts` the parts
another implementation may provide.
"""
