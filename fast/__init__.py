"""fast: mmap + numpy implementations of the spec protocols (RocketMQ's on-disk format).

Never imports `reference`; the conformance suite diffs the two.

`MmapMessageStore` (fast.store) keeps RocketMQ 4.x's own layout — `commitlog/` files of v1
records closed by end-of-file blanks, `consumequeue/<topic>/<queueId>/` files of 20-byte entries,
a `checkpoint` page — so it opens directories a 4.x broker wrote. Pulls scan consume-queue
windows and decode records only when read; `get_messages` answers many pulls in one pass and
`pull_through` a consumer's consecutive pulls of one queue, both with columnar answers.
`MessageBatch` appends many messages by columns. Opening recovers from a crash: the commit log
is validated from the checkpoint, a torn tail cut, missing queue entries rebuilt. The per-record
loops (window scans, record encoding, body CRCs, recovery's walk) run compiled when numba is
installed (the `accel` extra) and in numpy otherwise, with the same answers. Many threads may put
and pull at once: appends take one lock, reads none. `fast.integrity` checks a store directory
record by record and entry by entry (`pullspec store verify`).

Start with docs/using/fast.md (every example there runs when the site is built); each name below
carries its own example in its docstring.
"""

from pullspec.fast.batch import MessageBatch
from pullspec.fast.broker_store import broker_file_sizes, open_broker_store
from pullspec.fast.process_queue import FastProcessQueue
from pullspec.fast.putvector import PutResults
from pullspec.fast.read_plan import GetRequest
from pullspec.fast.recovery import RecoveryReport
from pullspec.fast.results import MultiGetResult
from pullspec.fast.store import MmapMessageStore

__all__ = [
    "FastProcessQueue",
    "GetRequest",
    "MessageBatch",
    "MmapMessageStore",
    "MultiGetResult",
    "PutResults",
    "RecoveryReport",
    "broker_file_sizes",
    "open_broker_store",
]
