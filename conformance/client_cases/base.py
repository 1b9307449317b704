"""What an area module of `conformance.client_cases` writes its cases in: `Case`, steps (`s`)
and the vectors' JSON for a queue (`mq`) and a message (`msg`)."""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from pullspec.conformance.jsontypes import JSONObject, JSONValue

#: One step: (op, args).
Step = tuple[str, Mapping[str, JSONValue]]

#: A case's config, in the vectors' keys.
Config = Mapping[str, JSONValue]


@attrs.frozen
class Case:
    """One vector case before it runs: area, name, config and steps."""

    area: str
    name: str
    config: Config
    steps: tuple[Step, ...]
    kind: str = "edge"

    @property
    def id(self) -> str:
        """The vector case id: ``<area>.<kind>-<name>``."""
        return f"{self.area}.{self.kind}-{self.name}"


def s(op: str, **args: JSONValue) -> Step:
    """A step; keyword arguments are the op's camelCase args."""
    return (op, args)


def mq(queue_id: int, topic: str = "T", broker: str = "b") -> JSONObject:
    """A MessageQueue in the vectors' JSON."""
    return {"topic": topic, "brokerName": broker, "queueId": queue_id}


def msg(offset: int, tags: str | None = None, **more: JSONValue) -> JSONObject:
    """A consumer-side message in the vectors' JSON."""
    out: JSONObject = {"queueOffset": offset}
    if tags is not None:
        out["tags"] = tags
    out.update(more)
    return out
