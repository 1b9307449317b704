"""What an area module of `conformance.client_cases` writes its cases in: `Case`, steps (`s`)
and the vectors' JSON for a queue (`mq`) and a message (`msg`)."""

from __future__ import annotations

from typing import Any

import attrs

#: One step: (op, args).
Step = tuple[str, dict[str, Any]]


@attrs.frozen
class Case:
    """One vector case before it runs: area, name, config and steps."""

    area: str
    name: str
    config: dict[str, Any]
    steps: tuple[Step, ...]
    kind: str = "edge"

    @property
    def id(self) -> str:
        """The vector case id: ``<area>.<kind>-<name>``."""
        return f"{self.area}.{self.kind}-{self.name}"


def s(op: str, **args: Any) -> Step:
    """A step; keyword arguments are the op's camelCase args."""
    return (op, args)


def mq(queue_id: int, topic: str = "T", broker: str = "b") -> dict[str, Any]:
    """A MessageQueue in the vectors' JSON."""
    return {"topic": topic, "brokerName": broker, "queueId": queue_id}


def msg(offset: int, tags: str | None = None, **more: Any) -> dict[str, Any]:
    """A consumer-side message in the vectors' JSON."""
    out: dict[str, Any] = {"queueOffset": offset}
    if tags is not None:
        out["tags"] = tags
    out.update(more)
    return out
