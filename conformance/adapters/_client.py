"""Shared plumbing of the areas whose vectors are generated from the reference (the client areas
pull_decision, offset_store, rebalance, …, and the broker-side broker_pull, schedule, …).

Each area module is thin: `create` opens a *driver* — an object with
``apply(op, args) -> observation`` (`conformance.candidates.AreaDriver`) — and `apply` forwards
to it. A driver comes from, in order:

1. a `cmd:` candidate, which receives the area's ops over the JSON Lines protocol unchanged;
2. the candidate's own factory named after the area (``candidate.pull_decision(config,
   profile)``): the reference's (`reference.factories`) drive the reference's own classes
   (`reference.areas`), any other Python implementation provides its own;
3. for the broker-side areas only, a driver of the reference broker kept beside the adapter.

Anything else is UNSUPPORTED. The JSON ↔ spec helpers the drivers share live with the reference
(`reference.areas._vocab`) and are re-exported here for the broker-side drivers.
"""

from __future__ import annotations

from collections.abc import Callable

from pullspec.conformance.candidates import AreaDriver, Candidate, Peer, driver_factory, name_of
from pullspec.conformance.jsontypes import JSONObject
from pullspec.reference.areas._vocab import (
    Args,
    DriverBase,
    action_json,
    broker_addrs,
    camel,
    consumer_config,
    enum_of,
    message,
    message_json,
    mq,
    mq_json,
    mqs,
    mqs_json,
    sorted_by_mq,
    subscription,
    value_json,
)
from pullspec.spec.errors import PullspecError, UnsupportedError
from pullspec.spec.profiles import Profile

#: The base of the broker-side reference drivers kept in conformance.adapters.
ReferenceDriver = DriverBase

__all__ = [
    "Args",
    "DriverBase",
    "Forwarding",
    "ReferenceDriver",
    "action_json",
    "broker_addrs",
    "camel",
    "consumer_config",
    "enum_of",
    "message",
    "message_json",
    "mq",
    "mq_json",
    "mqs",
    "mqs_json",
    "open_driver",
    "sorted_by_mq",
    "subscription",
    "value_json",
]


class Forwarding:
    """A driver for a `cmd:` candidate: every op travels over the subprocess protocol."""

    def __init__(self, peer: Peer, area: str, config: JSONObject, profile: Profile) -> None:
        self.peer, self.area = peer, area
        try:
            self.instance = peer.create(area, config, profile)
        except UnsupportedError:
            raise
        except PullspecError as exc:
            # An adapter written before these areas existed rejects the name itself: for the
            # runner that is an area it does not implement, not a failed case.
            raise UnsupportedError(f"the adapter refused area {area}: {exc}") from exc

    def apply(self, op: str, args: JSONObject) -> JSONObject:
        """Send one op; a typed error reply raises its spec error, as the runner expects."""
        return self.peer.check(self.peer.call(self.instance, self.area, op, args))


def open_driver(
    candidate: Candidate,
    area: str,
    config: JSONObject,
    profile: Profile,
    reference: Callable[[JSONObject, Profile], AreaDriver] | None = None,
) -> AreaDriver:
    """The driver of one case (see the module docstring for the order)."""
    if isinstance(candidate, Peer):
        return Forwarding(candidate, area, config, profile)
    factory = driver_factory(candidate, area)
    if factory is not None:
        return factory(config, profile)
    if reference is not None and name_of(candidate) == "reference":
        return reference(config, profile)
    raise UnsupportedError(f"the candidate has no {area} driver")
