"""Adapter for area `store_layout`: the store's file arithmetic and the pull path's small
tables — consume-queue entries and files, commit-log files, record magic codes, getMessage's
starting values, result sizes, response codes and the untagged-message filter.

Stateless: every op is one question with one answer. Byte strings are lower-case hex.

| op | args | expect |
|---|---|---|
| `cq_entry` | `phys`, `size`, `tagsCode` | `bytes` (the 20-byte entry) |
| `cq_position` | `index`, `mappedFileSizeConsumeQueue` | `unitsPerFile`, `file`, `position` |
| `pre_blank` | `firstIndex`, `unitsPerFile` | `entries` |
| `commit_log_file` | `phys`, `mappedFileSizeCommitLog` | `fileStart`, `nextFileStart` |
| `record_magic` | `magic` (signed 32-bit) | `kind` (MESSAGE, BLANK or null: corrupt) |
| `get_message_start` | `offset`, `shutDown`, `runningFlagsReadable` | `serves`, `code` (the processor's answer to a missing result, or null), `initial` {`status`, `nextBeginOffset`, `minOffset`, `maxOffset`, `suggestPullingFromSlave`} |
| `scan_status` | `status` (the scan's last written status), `returned` (offsets returned) | `status` |
| `buffer_total_size` | `sizes` | `bufferTotalSize` |
| `success_body` | `records` (hex) | `body` (hex) |
| `pull_outcome_code` | `status`, `offset`, `brokerRole`, `offsetCheckInSlave` | `code` |
| `untagged_matches` | `expression` | `matches` |
"""

from __future__ import annotations

from pathlib import Path

from pullspec.conformance.adapters import _client
from pullspec.conformance.candidates import AreaDriver, Candidate
from pullspec.conformance.jsontypes import JSONObject
from pullspec.spec import code, layout, scan, store
from pullspec.spec import filter as spec_filter
from pullspec.spec.layout import CQ_STORE_UNIT_SIZE
from pullspec.spec.profiles import Profile
from pullspec.spec.status import BrokerRole, GetMessageStatus

#: The vector area this module serves.
AREA = "store_layout"


class Reference(_client.ReferenceDriver):
    """The reference driver: spec.layout, spec.store, spec.scan, spec.code and spec.filter."""

    area = AREA

    def op_cq_entry(self, args: _client.Args) -> JSONObject:
        """A consume-queue entry (LAYOUT-1)."""
        return {
            "bytes": layout.pack_cq_entry(
                args.int("phys"), args.int("size"), args.int("tagsCode")
            ).hex()
        }

    def op_cq_position(self, args: _client.Args) -> JSONObject:
        """Where index i of a consume queue lives (LAYOUT-2)."""
        units = layout.consume_queue_units_per_file(args.int("mappedFileSizeConsumeQueue"))
        index = args.int("index")
        return {
            "unitsPerFile": units,
            "file": index // units,
            "position": (index % units) * CQ_STORE_UNIT_SIZE,
        }

    def op_pre_blank(self, args: _client.Args) -> JSONObject:
        """Pre-blank entries of a queue's first file (LAYOUT-3)."""
        return {
            "entries": layout.pre_blank_entries(args.int("firstIndex"), args.int("unitsPerFile"))
        }

    def op_commit_log_file(self, args: _client.Args) -> JSONObject:
        """The file holding a commit-log offset and the next file's start (LAYOUT-4, STORE-15)."""
        phys, size = args.int("phys"), args.int("mappedFileSizeCommitLog")
        return {
            "fileStart": layout.commit_log_file_start(phys, size),
            "nextFileStart": scan.commit_log_roll_next_file(phys, size),
        }

    def op_record_magic(self, args: _client.Args) -> JSONObject:
        """What a record's magic code says (LAYOUT-6)."""
        kind = layout.is_record_magic(args.int("magic"))
        return {"kind": None if kind is None else ("MESSAGE" if kind else "BLANK")}

    def op_get_message_start(self, args: _client.Args) -> JSONObject:
        """getMessage's gate and starting values (STORE-1, STORE-2, CODE-4)."""
        serves = store.store_can_serve(args.bool("shutDown"), args.bool("runningFlagsReadable"))
        status, next_begin, lo, hi, slave = store.initial_get_message_values(args.int("offset"))
        return {
            "serves": serves,
            "code": None if serves else code.no_store_result_code().name,
            "initial": {
                "status": status.value,
                "nextBeginOffset": next_begin,
                "minOffset": lo,
                "maxOffset": hi,
                "suggestPullingFromSlave": slave,
            },
        }

    def op_scan_status(self, args: _client.Args) -> JSONObject:
        """A scan's final status (STORE-13)."""
        state = scan.ScanState(
            status=args.enum("status", GetMessageStatus),
            returned=tuple(args.get("returned", [])),
        )
        return {"status": scan.final_scan_status(state).value}

    def op_buffer_total_size(self, args: _client.Args) -> JSONObject:
        """A result's total size (STORE-17)."""
        return {"bufferTotalSize": store.buffer_total_size(list(args.req("sizes")))}

    def op_success_body(self, args: _client.Args) -> JSONObject:
        """A SUCCESS response body (CODE-11)."""
        records = tuple(bytes.fromhex(r) for r in args.req("records"))
        return {"body": code.success_body(records).hex()}

    def op_pull_outcome_code(self, args: _client.Args) -> JSONObject:
        """The response code of a store status on a role (CODE-14)."""
        answer = code.pull_outcome_code(
            args.enum("status", GetMessageStatus),
            args.int("offset"),
            args.enum("brokerRole", BrokerRole),
            args.bool("offsetCheckInSlave"),
        )
        return {"code": answer.name}

    def op_untagged_matches(self, args: _client.Args) -> JSONObject:
        """Whether an untagged message passes a TAG subscription (FILTER-5)."""
        sub = spec_filter.build_subscription_data("T", args.get("expression"))
        return {"matches": spec_filter.untagged_message_matches(sub)}


def create(candidate: Candidate, config: JSONObject, profile: Profile, base: Path) -> AreaDriver:
    """A stateless driver."""
    return _client.open_driver(candidate, AREA, config, profile, Reference)


def apply(instance: AreaDriver, op: str, args: JSONObject) -> JSONObject:
    """Run one step."""
    return instance.apply(op, args)
