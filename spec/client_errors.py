"""The client's remote-failure exceptions: what an RPC or a broker answer raises on the pull and
offset paths (the Java checked exceptions the callers catch by type)."""

from __future__ import annotations


class MQClientError(Exception):
    """Java's MQClientException: a client-side failure (no broker address, no filter server,
    a failed or timed-out RPC, a failed offset query)."""

    java_exception = "MQClientException"


class MQBrokerError(Exception):
    """Java's MQBrokerException: the broker answered with a code the caller does not accept."""

    java_exception = "MQBrokerException"

    def __init__(self, code: int, remark: str | None = None, addr: str | None = None) -> None:
        self.code = code
        self.remark = remark
        self.addr = addr
        super().__init__(f"CODE: {code} DESC: {remark} BROKER: {addr}")
