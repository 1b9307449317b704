"""The reference driver of area `pull_request` (vocabulary: conformance.adapters.pull_request, docs/protocol.md)."""

from __future__ import annotations

from typing import Any, ClassVar

from pullspec.reference.areas import _vocab as _client
from pullspec.reference.areas import _wiring
from pullspec.reference.pull_service import PullRequest
from pullspec.spec import pull_route
from pullspec.spec.client_errors import MQClientError
from pullspec.spec.profiles import Profile

#: The vector area this module serves.
AREA = "pull_request"


class Driver(_client.DriverBase):
    """pullKernelImpl of a running ReferencePushConsumer: every `pull` sends one pull over a
    network that knows the op's broker map, version and filter servers, and never answers."""

    area = AREA
    #: The reference classes this driver builds (a mutant replaces one).
    classes: ClassVar[_wiring.Classes] = _wiring.REFERENCE

    def __init__(self, config: dict[str, Any], profile: Profile) -> None:
        super().__init__(config, profile)
        self.consumer = _client.consumer_config(config)
        self.group = str(config.get("consumerGroup", _wiring.GROUP))

    def op_pull(self, args: _client.Args) -> dict[str, Any]:
        """One pull from pullMessage's callback capture to the header and the target address."""
        queue = _client.mq(args.req("mq"))
        sub = _client.subscription(args.req("subscription"), queue.topic)
        assert sub is not None
        rig = _wiring.PushConsumerRig(self.consumer, self.profile, self.group, self.classes)
        lookup = (
            _client.subscription(args.raw["lookupSubscription"], queue.topic)
            if "lookupSubscription" in args.raw
            else sub
        )
        if lookup is not None:
            rig.hooks.subscriptions[queue.topic] = lookup
        addrs = _client.broker_addrs(args.req("brokerAddrs"))
        rig.remoting.addrs[queue.broker_name] = addrs
        rig.remoting.version = args.int("brokerVersion", 0x7FFFFFFF)
        rig.remoting.servers = args.get("filterServers")
        rig.consumer.random_num = lambda: args.int("randomNum", 0)
        rig.consumer.only_this_broker = args.bool("onlyThisBroker", False)
        if args.get("pullFromWhichNode") is not None:
            rig.consumer.pull_from_which_node[queue] = args.int("pullFromWhichNode")
        rig.offset_store.update_offset(queue, args.int("memoryOffset", -1), False)
        rig.clock.jump_to(args.int("now", 0))
        request = PullRequest(rig.consumer.group, queue, rig.pq, args.int("nextOffset"))
        rig.consumer.send_pull(request, sub)
        out: dict[str, Any] = {"beginTimestamp": rig.clock.now_ms()}
        if rig.remoting.asked_version:
            # The broker found is the one whose version pullKernelImpl asked (REQ-6, REQ-7).
            addr = rig.remoting.asked_version[-1]
            out.update(brokerAddr=addr, slave=any(i != 0 for i, a in addrs.items() if a == addr))
        if rig.remoting.pulls:
            target, header, _, _ = rig.remoting.pulls[0]
            out.update(header=_client.value_json(header), targetAddr=target)
            return out
        # pullKernelImpl threw before the RPC (REQ-11): no broker, an unsupported filter type.
        outcome = rig.consumer.outcomes[-1]
        out["exception"] = MQClientError.java_exception
        out["action"] = _client.action_json(outcome.reenqueue)
        return out

    def op_build_sys_flag(self, args: _client.Args) -> dict[str, Any]:
        """PullSysFlag.buildSysFlag (REQ-4) and the slave rewrite (REQ-8)."""
        flag = pull_route.build_sys_flag(
            args.bool("commitOffset"),
            args.bool("suspend"),
            args.bool("subscription"),
            args.bool("classFilter"),
            args.bool("litePull", False),
        )
        return {
            "sysFlag": flag,
            "sysFlagForBroker": pull_route.sys_flag_for_broker(flag, args.bool("slave", False)),
        }
