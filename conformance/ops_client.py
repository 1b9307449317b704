"""Rule IDs each op of the reference-generated areas exercises (conformance.ops.OP_RULES).

Measured, not typed: every client case (edge cases and eight seeded random traces per area, both
profiles) was run on the reference with a profiler recording which rule functions each op
called (`conformance.client_vectors.tracing`); `create` is what a fresh instance runs. Where an
area's large ops share most of their rules (the ops that each end in a pull round, say), the
shared rules are written once as the area's constant and each op says what it runs besides.
After changing a driver or a case, `python -m pullspec.conformance.client_vectors --op-rules`
prints the constants and the table anew (paste them over everything below `_ids`, then run
ruff format); `tests/test_conformance_client_areas.py` checks that the table is what a fresh
measurement gives.
"""

from __future__ import annotations

from collections.abc import Mapping


def _ids(text: str) -> frozenset[str]:
    """The rule IDs `text` lists, separated by blanks: ``_ids("PQ-1 PQ-2")``."""
    return frozenset(text.split())


#: pull_loop: the rules advance, put, rebalance all run.
_PULL_LOOP = _ids(
    "FLOW-1 FLOW-2 FLOW-3 FLOW-4 FLOW-5 FLOW-6 FLOW-7 FLOW-8 FLOW-11 FLOW-13"
    " OFFSET-2 OFFSET-4 PQ-2 PQ-3 PQ-4 PQ-5 PQ-6 PQ-7 PQ-13 PQ-17 PULLQ-1"
    " PULLQ-2 PULLQ-3 PULLQ-4 PULLQ-6 PULLQ-8 PULLQ-9 REQ-1 REQ-2 REQ-3 REQ-4"
    " REQ-5 REQ-6 REQ-7 REQ-8 REQ-9 REQ-10 REQ-12 RESULT-1 RESULT-2 RESULT-3"
    " RESULT-4 RESULT-5 RESULT-7 RESULT-15"
)

#: broker_pull: the rules advance_clock, pull, put all run.
_BROKER_PULL = _ids(
    "BATCH-1 BATCH-2 BATCH-3 BATCH-4 CODE-1 CODE-2 CODE-5 CODE-6 CODE-7"
    " CODE-9 COMMIT-2 FILTER-2 FILTER-3 FILTER-4 FILTER-6 FILTER-8 STORE-3"
    " STORE-4 STORE-5 STORE-9 STORE-11 STORE-12 STORE-14 STORE-16 STORE-20"
    " STORE-21"
)

#: schedule: the rules advance_clock, put, send_back, send_message all run.
_SCHEDULE = _ids(
    "FILTER-1 FILTER-2 HOLD-5 LAYOUT-5 LAYOUT-7 LAYOUT-8 LAYOUT-9 LAYOUT-10"
    " LAYOUT-11 LAYOUT-13 RETRY-8 STORE-3 STORE-18 STORE-20 STORE-21 STORE-22"
)


CLIENT_OP_RULES: Mapping[str, Mapping[str, frozenset[str]]] = {
    "pull_loop": {
        "advance": _PULL_LOOP
        | _ids("FLOW-9 FLOW-10 OFFSET-6 OFFSET-8 PQ-14 REBAL-14 REBAL-16 RESULT-8 RESULT-9"),
        "create": _ids("FILTER-3 FLOW-15 REBAL-18"),
        "hold": _ids("PQ-6"),
        "put": _PULL_LOOP,
        "rebalance": _PULL_LOOP
        | _ids(
            "FLOW-9 FLOW-10 FLOW-14 FLOW-15 OFFSET-5 PQ-1 PQ-14 PQ-16 PULLQ-5 REBAL-2"
            " REBAL-3 REBAL-5 REBAL-9 REBAL-10 REBAL-11 REBAL-12 REBAL-13 REBAL-14"
            " REBAL-17 RESULT-10"
        ),
        "release": _ids("OFFSET-2 PQ-6 PQ-7 PQ-17"),
        "set_offset": _ids("PQ-6"),
        "shutdown": _ids("OFFSET-6 OFFSET-8 PQ-6"),
        "start": _ids(""),
    },
    "pull_decision": {
        "attempt": _ids(
            "FILTER-3 FLOW-1 FLOW-2 FLOW-3 FLOW-4 FLOW-5 FLOW-6 FLOW-7 FLOW-8 FLOW-9"
            " FLOW-10 FLOW-11 FLOW-12 FLOW-13 OFFSET-4 OFFSET-5 PULLQ-4 PULLQ-8"
            " PULLQ-9 REBAL-17 REQ-1 REQ-2 REQ-3 REQ-4 REQ-5 REQ-6 REQ-7 REQ-8 REQ-9"
            " REQ-10"
        ),
        "check_config": _ids("FLOW-15"),
        "create": _ids("FLOW-15 PQ-1 REBAL-18"),
        "queue_changed": _ids("FLOW-14 FLOW-15"),
    },
    "pull_service": {
        "advance": _ids("PULLQ-1 PULLQ-2 PULLQ-3 PULLQ-6"),
        "create": _ids(""),
        "execute_immediately": _ids("PQ-1 PULLQ-2 PULLQ-3"),
        "execute_later": _ids("PQ-1 PULLQ-4"),
        "execute_task_later": _ids("PULLQ-4 PULLQ-5"),
        "register_consumer": _ids(""),
        "same_request": _ids("PQ-1 PULLQ-7"),
        "shutdown": _ids("PULLQ-10"),
        "start": _ids(""),
        "thread_start_times": _ids("PULLQ-11"),
        "unregister_consumer": _ids(""),
    },
    "pull_request": {
        "build_sys_flag": _ids("REQ-4 REQ-8"),
        "create": _ids("FLOW-15"),
        "pull": _ids(
            "FILTER-2 FILTER-3 OFFSET-2 OFFSET-4 PQ-1 PULLQ-4 REQ-1 REQ-2 REQ-3 REQ-4"
            " REQ-5 REQ-6 REQ-7 REQ-8 REQ-9 REQ-10 REQ-11"
        ),
    },
    "pull_result": {
        "create": _ids("FLOW-15"),
        "on_exception": _ids("PQ-1 PULLQ-4 RESULT-13"),
        "on_success": _ids(
            "FILTER-2 FILTER-3 OFFSET-2 PQ-1 PULLQ-2 PULLQ-3 PULLQ-4 PULLQ-5 REQ-1"
            " RESULT-1 RESULT-2 RESULT-3 RESULT-4 RESULT-5 RESULT-6 RESULT-7 RESULT-8"
            " RESULT-9 RESULT-10 RESULT-11 RESULT-12 RESULT-15"
        ),
        "on_success_throws": _ids("RESULT-14"),
        "response": _ids("CODE-13 REQ-12"),
    },
    "offset_store": {
        "broker_address": _ids("OFFSET-7 REQ-6"),
        "broker_state": _ids(""),
        "create": _ids("OFFSET-1 OFFSET-9"),
        "load": _ids("OFFSET-10"),
        "persist": _ids("OFFSET-12"),
        "persist_all": _ids("OFFSET-6 OFFSET-11"),
        "persist_consumer_offset": _ids("FLOW-15 OFFSET-6 OFFSET-8 PQ-1"),
        "read_offset": _ids("OFFSET-2 OFFSET-4 OFFSET-5 OFFSET-10"),
        "rebalance_reset": _ids("OFFSET-2 OFFSET-4 OFFSET-5 OFFSET-13"),
        "remove_offset": _ids("OFFSET-12"),
        "update_by": _ids("OFFSET-2 OFFSET-3"),
        "update_offset": _ids("OFFSET-2"),
        "update_to_broker": _ids("OFFSET-12"),
        "write_file": _ids(""),
    },
    "allocate": {
        "allocate": _ids("REBAL-6 REBAL-7 REBAL-8"),
        "client_id": _ids("REBAL-24"),
        "create": _ids(""),
        "next_rebalance_at": _ids("REBAL-1"),
        "rebalance_by_topic": _ids(
            "FILTER-3 FLOW-14 FLOW-15 OFFSET-4 OFFSET-5 PQ-1 REBAL-4 REBAL-5 REBAL-6"
            " REBAL-7 REBAL-9 REBAL-10 REBAL-11 REBAL-12 REBAL-13 REBAL-17 REBAL-18"
        ),
        "rebalance_topics": _ids("FILTER-3 FLOW-15 PQ-1 PQ-14 REBAL-2 REBAL-3 REBAL-5 REBAL-18"),
    },
    "rebalance": {
        "advance_clock": _ids("PQ-15 PQ-16"),
        "compute_pull_from_where": _ids("FLOW-15 REBAL-17 REBAL-18"),
        "create": _ids("FLOW-15 REBAL-18"),
        "destroy": _ids("PQ-14 REBAL-23"),
        "lease_timeline": _ids("REBAL-22"),
        "lock": _ids("PQ-15 PQ-16 REBAL-19"),
        "lock_all": _ids("PQ-15 PQ-16 REBAL-20"),
        "remove_process_queue": _ids("PQ-14 REBAL-14 REBAL-16"),
        "set_queue": _ids("OFFSET-2 PQ-1 PQ-2 PQ-3 PQ-4 PQ-5 PQ-12 PQ-13 PQ-14 PQ-15 PQ-16"),
        "unlock": _ids("PQ-15 PQ-16 REBAL-21"),
        "update_table": _ids(
            "FILTER-3 FLOW-14 FLOW-15 OFFSET-2 OFFSET-4 OFFSET-5 PQ-1 PQ-14 PQ-15"
            " PQ-16 PQ-20 REBAL-9 REBAL-10 REBAL-11 REBAL-12 REBAL-13 REBAL-14"
            " REBAL-15 REBAL-17 REBAL-19 REBAL-21"
        ),
    },
    "consume_concurrently": {
        "advance_clock": _ids("CONC-11 LAYOUT-12 PQ-7 PQ-17 PQ-18"),
        "clean_expire_schedule": _ids("CONC-13 ORDER-18"),
        "create": _ids("FLOW-15 PQ-1"),
        "listener_returned": _ids("CONC-5 CONC-12 PQ-1 PQ-2 PQ-3 PQ-4 PQ-5 PQ-11 PQ-13 PQ-14"),
        "process_result": _ids(
            "CONC-3 CONC-6 CONC-7 CONC-8 CONC-9 CONC-10 CONC-11 LAYOUT-12 OFFSET-2"
            " PQ-7 PQ-11 PQ-14 PQ-17"
        ),
        "put_messages": _ids("FILTER-2 PQ-2 PQ-3 PQ-4 PQ-5 PQ-13"),
        "reset_retry": _ids("CONC-5 CONC-12 PQ-1 PQ-2 PQ-3 PQ-4 PQ-5 PQ-11 PQ-13 PQ-14"),
        "resubmit": _ids("CONC-3"),
        "run_request": _ids("CONC-4"),
        "shutdown": _ids("CONC-14"),
        "start": _ids("CONC-13"),
        "submit": _ids("CONC-2 CONC-3 FLOW-15"),
        "update_core_pool_size": _ids("CONC-1"),
    },
    "consume_orderly": {
        "create": _ids("FLOW-15 ORDER-2 PQ-1"),
        "gate": _ids("ORDER-2 ORDER-4 PQ-1 PQ-14 PQ-15"),
        "listener": _ids(
            "CONC-12 LAYOUT-12 OFFSET-2 ORDER-7 ORDER-8 ORDER-9 ORDER-10 ORDER-11"
            " ORDER-12 ORDER-14 ORDER-15 PQ-9 PQ-10 PQ-11 PQ-14"
        ),
        "lock_schedule": _ids("ORDER-1"),
        "loop_step": _ids("ORDER-5 ORDER-6 ORDER-12 ORDER-16 PQ-8 PQ-14 PQ-15 PQ-17"),
        "put_messages": _ids("FILTER-2 ORDER-3 PQ-2 PQ-3 PQ-4 PQ-5 PQ-13"),
        "shutdown": _ids("ORDER-17"),
        "try_lock_later": _ids("ORDER-13"),
    },
    "process_queue_maintenance": {
        "advance_clock": _ids(""),
        "clean_expired_msg": _ids("PQ-7 PQ-17 PQ-18"),
        "clear": _ids("PQ-12"),
        "create": _ids("PQ-1"),
        "inc_try_unlock_times": _ids("PQ-20"),
        "interrupted": _ids("PQ-19"),
        "put_messages": _ids("PQ-2 PQ-3 PQ-4 PQ-5 PQ-13"),
        "set_dropped": _ids("PQ-14"),
    },
    "broker_pull": {
        "advance_clock": _BROKER_PULL
        | _ids("CODE-8 CODE-12 COMMIT-5 HOLD-2 HOLD-3 HOLD-4 HOLD-6 STORE-6 STORE-7"),
        "client_gone": _ids("LEASE-3 LEASE-9"),
        "create": _ids("HOLD-2 RETRY-7"),
        "lock_batch": _ids("LEASE-2 LEASE-3 LEASE-4 LEASE-5 LEASE-6 LEASE-8"),
        "pull": _BROKER_PULL
        | _ids(
            "CODE-3 CODE-8 CODE-10 CODE-12 CODE-15 COMMIT-1 FILTER-1 FILTER-7"
            " FILTER-9 HOLD-1 HOLD-2 HOLD-7 HOLD-10 LAYOUT-5 LAYOUT-7 LAYOUT-8"
            " LAYOUT-9 LAYOUT-10 LAYOUT-11 LAYOUT-13 RETRY-8 STORE-6 STORE-7 STORE-8"
            " STORE-18"
        ),
        "put": _BROKER_PULL
        | _ids(
            "FILTER-1 HOLD-4 HOLD-5 HOLD-6 HOLD-8 HOLD-9 LAYOUT-5 LAYOUT-7 LAYOUT-8"
            " LAYOUT-9 LAYOUT-10 LAYOUT-11 LAYOUT-13 RETRY-8 STORE-15 STORE-18"
            " STORE-22"
        ),
        "query_offset": _ids("BATCH-3 COMMIT-4 STORE-3 STORE-4 STORE-20"),
        "register_consumer": _ids("FILTER-2 FILTER-3"),
        "set_lock_max_live_time_property": _ids("LEASE-1"),
        "set_role": _ids(""),
        "unlock_batch": _ids("LEASE-3 LEASE-7 LEASE-8"),
        "update_offset": _ids("COMMIT-1 COMMIT-3"),
    },
    "schedule": {
        "advance_clock": _SCHEDULE
        | _ids(
            "BATCH-1 BATCH-2 BATCH-3 BATCH-4 RETRY-9 STORE-4 STORE-5 STORE-6 STORE-7"
            " STORE-9 STORE-11 STORE-12 STORE-14 STORE-16"
        ),
        "create": _ids("HOLD-2 RETRY-7"),
        "put": _SCHEDULE,
        "retry_timetable": _ids("RETRY-5 RETRY-10"),
        "send_back": _SCHEDULE | _ids("LAYOUT-12 RETRY-1 RETRY-2 RETRY-3 RETRY-4 RETRY-5 RETRY-6"),
        "send_message": _SCHEDULE | _ids("RETRY-3 RETRY-11"),
    },
    "store_layout": {
        "buffer_total_size": _ids("STORE-17"),
        "commit_log_file": _ids("LAYOUT-4 STORE-15"),
        "cq_entry": _ids("LAYOUT-1"),
        "cq_position": _ids("LAYOUT-2"),
        "create": _ids(""),
        "get_message_start": _ids("CODE-4 STORE-1 STORE-2"),
        "pre_blank": _ids("LAYOUT-3"),
        "pull_outcome_code": _ids("CODE-7 CODE-8 CODE-10 CODE-14"),
        "record_magic": _ids("LAYOUT-6"),
        "scan_status": _ids("STORE-13"),
        "success_body": _ids("CODE-11"),
        "untagged_matches": _ids("FILTER-1 FILTER-2 FILTER-3 FILTER-4 FILTER-5"),
    },
    "invariants": {
        "broker_commit_monotone": _ids("INV-4"),
        "client_offset_monotone": _ids("INV-3"),
        "consumed_at_most_once": _ids("INV-2"),
        "copy_not_lost": _ids("INV-1"),
        "create": _ids(""),
        "dlq_accounted": _ids("INV-8"),
        "one_orderly_owner": _ids("INV-5"),
        "orderly_in_order": _ids("INV-6"),
        "within_flow_bound": _ids("INV-7"),
    },
}
