"""The reference driver of area `pull_request` (vocabulary: conformance.adapters.pull_request, docs/protocol.md)."""

from __future__ import annotations

from typing import Any

from pullspec.reference.areas import _vocab as _client
from pullspec.spec import pull_request, pull_route
from pullspec.spec.client_errors import MQClientError
from pullspec.spec.profiles import Profile

#: The vector area this module serves.
AREA = "pull_request"


class Driver(_client.DriverBase):
    """The reference driver: spec.pull_request and spec.pull_route in pullKernelImpl's order."""

    area = AREA

    def __init__(self, config: dict[str, Any], profile: Profile) -> None:
        super().__init__(config, profile)
        self.consumer = _client.consumer_config(config)
        self.group = str(config.get("consumerGroup", "G"))

    def op_pull(self, args: _client.Args) -> dict[str, Any]:
        """One pull from pullMessage's callback capture to the header and the target address."""
        queue = _client.mq(args.req("mq"))
        sub = _client.subscription(args.req("subscription"), queue.topic)
        assert sub is not None
        lookup = (
            _client.subscription(args.raw["lookupSubscription"], queue.topic)
            if "lookupSubscription" in args.raw
            else sub
        )
        context = pull_request.capture_pull_callback(args.int("now", 0), sub)
        commit = pull_request.commit_offset_for_pull(
            self.consumer.message_model, args.int("memoryOffset", -1)
        )
        call = pull_request.pull_kernel_call(
            queue, args.int("nextOffset"), sub, lookup, commit, self.consumer
        )
        out: dict[str, Any] = {"beginTimestamp": context.begin_timestamp}
        try:
            broker = pull_route.find_broker_address_in_subscribe(
                _client.broker_addrs(args.req("brokerAddrs")),
                pull_route.recalculate_pull_from_which_node(args.get("pullFromWhichNode")),
                args.bool("onlyThisBroker", False),
                self.profile,
            )
            if broker is None:
                raise MQClientError(f"The broker[{queue.broker_name}] not exist")
            out.update(brokerAddr=broker.broker_addr, slave=broker.slave)
            pull_route.check_filter_type_supported(
                call.expression_type, args.int("brokerVersion", 0x7FFFFFFF), queue.broker_name
            )
            header = pull_request.pull_message_request_header(
                self.group, call, broker, self.profile
            )
            out["header"] = _client.value_json(header)
            # The filter server is chosen on the caller's flag, not the header's (REQ-10).
            out["targetAddr"] = pull_route.pull_target_address(
                call.sys_flag,
                broker.broker_addr,
                queue.topic,
                args.get("filterServers"),
                args.int("randomNum", 0),
            )
        except MQClientError:
            out["exception"] = MQClientError.java_exception
            out["action"] = _client.action_json(
                pull_request.on_pull_kernel_exception(self.consumer)
            )
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
