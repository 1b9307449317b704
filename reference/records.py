"""What a client part records of what it did (`Records`): the push consumer's pull attempts and
answers, a consume service's listener calls."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Generic, TypeVar, overload

T = TypeVar("T")


class Records(Sequence[T], Generic[T]):
    """A part's records, in order, and who is told of each: `append` keeps the record (unless a
    listener turned keeping off) and hands it to every listener. The simulator listens with
    `keep=False`, so a long run holds no growing list; tests and the area drivers read the kept
    records as a sequence.

    Example::

        >>> seen: list[int] = []
        >>> records = Records[int]()
        >>> records.append(1)
        >>> records.listen(seen.append, keep=False)
        >>> records.append(2)
        >>> (list(records), seen)
        ([1], [2])
    """

    def __init__(self) -> None:
        self._kept: list[T] = []
        self._keep = True
        self._listeners: list[Callable[[T], None]] = []

    def append(self, record: T) -> None:
        """Record one thing the part did."""
        if self._keep:
            self._kept.append(record)
        for listener in self._listeners:
            listener(record)

    def listen(self, listener: Callable[[T], None], *, keep: bool) -> None:
        """Tell `listener` of every later record; `keep=False` keeps none from now on."""
        self._listeners.append(listener)
        self._keep = self._keep and keep

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> list[T]: ...
    def __getitem__(self, index: int | slice) -> T | list[T]:
        return self._kept[index]

    def __len__(self) -> int:
        return len(self._kept)

    def __iter__(self) -> Iterator[T]:
        return iter(self._kept)

    def __repr__(self) -> str:
        return repr(self._kept)
