"""The append path of MmapMessageStore: a list or MessageBatch goes by columns (fast.putvector:
records encoded by columns, one numpy write per queue) when it is long enough, else message by
message (fast.putsmall) — CommitLog.asyncPutMessage, ReputMessageService."""

from __future__ import annotations

from collections.abc import Sequence

from pullspec.fast.batch import MessageBatch, columns_of
from pullspec.fast.putsmall import SmallPut
from pullspec.fast.putvector import PutResults, VectorPut
from pullspec.spec.message import BrokerInnerMessage
from pullspec.spec.results import PutMessageResult

#: Messages per list below which the per-message path is cheaper than numpy's fixed costs.
VECTOR_MIN = 32


class PutPath(VectorPut, SmallPut):
    """Mixin: the put half of MmapMessageStore."""

    def _put_list(self, msgs: Sequence[BrokerInnerMessage]) -> list[PutMessageResult]:
        """Append a list: by columns (`columns_of`, the vectorized path) when it has enough
        messages of a shape that path takes, else message by message."""
        if len(msgs) >= VECTOR_MIN and set(map(type, msgs)) == {BrokerInnerMessage}:
            batch = columns_of(msgs)
            plan = None if batch is None else self._plan(batch)
            if batch is not None and plan is not None:
                return self._store_batch(batch, plan).to_list()
        return self._put_each(msgs)

    def _put_columns(self, batch: MessageBatch) -> PutResults:
        """Append a MessageBatch: vectorized, or as its messages() when that path declines."""
        plan = self._plan(batch)
        if plan is not None:
            return self._store_batch(batch, plan)
        return PutResults.of(self._put_each(batch.messages()))
