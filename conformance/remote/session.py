"""The session with one remote instance, and what every forwarding object shares: the typed
errors a reply carries back and the configs in the vectors' keys.

A `RemoteSession` creates its remote instance at its first op, so that config learnt late still
goes into `create`; the forwarding objects (`conformance.remote.store`,
`conformance.remote.clocked`) run every call through one.
"""

from __future__ import annotations

import attrs

from pullspec.conformance.adapters._config import STORE_KEYS
from pullspec.conformance.candidates import CandidateCrashedError, Peer
from pullspec.conformance.jsontypes import JSONObject, JSONValue
from pullspec.conformance.ops import error_kind
from pullspec.spec.config import BrokerConfig, StoreConfig
from pullspec.spec.errors import ErrorKind, PullspecError, UnsupportedError
from pullspec.spec.evolve import evolve
from pullspec.spec.profiles import Profile
from pullspec.spec.retry import MQ_VERSION_ORDINALS
from pullspec.spec.ruleset import Ruleset


class RemoteError(PullspecError):
    """A typed error the subprocess reported: only its kind travels, never its text."""

    def __init__(self, kind: ErrorKind, message: str = "") -> None:
        self.kind = kind
        super().__init__(f"{kind.value}: {message}" if message else kind.value)


def raise_error(kind: ErrorKind, message: str = "") -> None:
    """Raise the spec error of `kind` (UnsupportedError for UNSUPPORTED, so verdicts match)."""
    if kind is ErrorKind.UNSUPPORTED:
        raise UnsupportedError(message or "the subprocess does not support this")
    raise RemoteError(kind, message)


_FIELD_KEYS = {field: key for key, field in STORE_KEYS.items()}
VERSION_NAMES = {ordinal: name for name, ordinal in MQ_VERSION_ORDINALS.items()}


def store_config_json(config: StoreConfig) -> JSONObject:
    """A StoreConfig in the vectors' MessageStoreConfig keys: the broker role and every setting
    that differs from RocketMQ's default (a default is left out, so an adapter never sees a
    1 GiB commit-log size it did not ask for); UnsupportedError if a setting has no key."""
    out: JSONObject = {"brokerRole": config.broker_role.value}
    default = StoreConfig()
    for field in attrs.fields(StoreConfig):
        value = getattr(config, field.name)
        if field.name == "broker_role" or value == getattr(default, field.name):
            continue
        if field.name not in _FIELD_KEYS:
            raise UnsupportedError(f"StoreConfig.{field.name} has no vector key")
        out[_FIELD_KEYS[field.name]] = value
    return out


def broker_config_json(config: BrokerConfig) -> JSONObject:
    """A BrokerConfig in the vectors' keys (only slaveReadEnable may differ from the default)."""
    if evolve(config, slave_read_enable=False) != BrokerConfig():
        raise UnsupportedError("a BrokerConfig beyond slaveReadEnable")
    return {"slaveReadEnable": config.slave_read_enable}


def raise_observed(observation: JSONObject) -> None:
    """Raise the typed error an observation carries (after its state was taken in)."""
    if observation.get("error") is not None:
        raise_error(error_kind(observation["error"]))


class RemoteSession:
    """One remote instance, created at its first op so that config learnt late still goes into
    `create`; a config change after that recreates it and replays its ops, which must answer
    exactly as before (a candidate that does not is not deterministic: CRASHED)."""

    def __init__(self, peer: Peer, area: str, config: JSONObject, profile: Profile) -> None:
        self.peer, self.area, self.config, self.profile = peer, area, config, profile
        #: The rules of the profile, looked up once.
        self.rules = Ruleset.of(profile)
        self._instance: int | None = None
        self._history: list[tuple[str, JSONObject, JSONObject]] = []

    def configure(self, **changes: JSONValue) -> None:
        """Set create-config keys; recreate and replay when they change a live instance."""
        if all(self.config.get(k) == v for k, v in changes.items()):
            return
        self.config.update(changes)
        if self._instance is None:
            return
        history, self._history, self._instance = self._history, [], None
        for op, args, reply in history:
            if self._raw(op, args) != reply:
                raise CandidateCrashedError(f"replaying {op} {args} answered differently")

    def _raw(self, op: str, args: JSONObject) -> JSONObject:
        if self._instance is None:
            self._instance = self.peer.create(self.area, self.config, self.profile)
        reply = self.peer.call(self._instance, self.area, op, args)
        self._history.append((op, args, reply))
        return reply

    def call(self, op: str, args: JSONObject) -> JSONObject:
        """Run one op and answer its observation (a top-level error reply raises)."""
        return self.peer.check(self._raw(op, args))
