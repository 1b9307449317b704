"""One running adapter process and its line-by-line conversation (docs/protocol.md): a request
goes out as one JSON line, its reply comes back as one. A reply that does not come within the
timeout is a `CandidateTimeoutError` (the process is killed); a process that exits or writes
something that is not a reply is a `CandidateCrashedError`, quoting the end of its stderr.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import tempfile
import time
from typing import IO, Literal, TypedDict

from pullspec.conformance.candidates import CandidateCrashedError, CandidateTimeoutError
from pullspec.conformance.jsontypes import JSONObject, JSONValue, is_object


class CreateRequest(TypedDict):
    """``create`` (docs/protocol.md, "Requests"): a fresh instance of `area` from a vector
    config and a profile (``"4.7"`` or ``"4.9"``); the request's id names it."""

    area: str
    op: Literal["create"]
    config: JSONObject
    profile: str


class OpRequest(TypedDict):
    """Any other op: applied, with `args`, to the instance named by `instance`."""

    area: str
    instance: int
    op: str
    args: JSONObject


#: A request as the suite writes it (`Channel.request` adds its `id`).
Request = CreateRequest | OpRequest


class ErrorReply(TypedDict):
    """A reply's `error` (docs/protocol.md, "Replies"): the request could not be served."""

    kind: str
    message: str


class OkReply(TypedDict):
    """A served request: `ok` holds the op's observation (for `create`, any object)."""

    id: JSONValue
    ok: JSONObject


class FailedReply(TypedDict):
    """A request that could not be served."""

    id: JSONValue
    error: ErrorReply


#: A reply as an adapter writes it (`conformance.example_adapter`); the suite reads each as an
#: unchecked JSON object, which `SubprocessCandidate.check` judges.
Reply = OkReply | FailedReply


#: How much of a crashed adapter's stderr a CRASHED verdict quotes: its last lines, whole.
TAIL_LINES = 12
TAIL_CHARS = 2000


def stderr_tail(data: bytes, lines: int = TAIL_LINES, chars: int = TAIL_CHARS) -> str:
    """The last complete lines of `data` (at most `lines` of them, about `chars` characters):
    a traceback's last lines name the error, so they are kept whole rather than cut mid-line.
    A single last line longer than `chars` is kept as its end."""
    text = data.decode("utf-8", errors="replace").rstrip()
    kept: list[str] = []
    size = 0
    for line in reversed(text.splitlines()):
        if kept and (len(kept) == lines or size + len(line) + 1 > chars):
            break
        kept.append(line if len(line) <= chars else "…" + line[-chars:])
        size += len(line) + 1
    return "\n".join(reversed(kept))


class Channel:
    """One running adapter process and its line-by-line conversation."""

    def __init__(self, argv: list[str], timeout: float) -> None:
        self.argv = argv
        self.timeout = timeout
        # Kept open for the life of the process (its tail explains a crash); closed in close().
        self._stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115
        try:
            self._proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr
            )
        except OSError as exc:
            raise CandidateCrashedError(f"cannot start {argv}: {exc}") from exc
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._stdin, self._stdout = self._proc.stdin, self._proc.stdout
        self._buffer = b""
        self._next_id = 1

    @property
    def alive(self) -> bool:
        """True while the process runs."""
        return self._proc.poll() is None

    def request(self, payload: Request) -> tuple[int, JSONObject]:
        """Send one request (an id is added) and return (id, reply)."""
        rid, self._next_id = self._next_id, self._next_id + 1
        line = json.dumps({"id": rid, **payload}, separators=(",", ":")) + "\n"
        try:
            self._stdin.write(line.encode("utf-8"))
            self._stdin.flush()
        except (BrokenPipeError, OSError):
            raise self._crashed("its stdin is closed") from None
        raw = self._read_line()
        try:
            reply: object = json.loads(raw)
        except json.JSONDecodeError:
            raise self._crashed(f"answered a line that is not JSON: {raw[:200]!r}") from None
        if not is_object(reply) or reply.get("id") != rid:
            raise self._crashed(f"answered {raw[:200]!r} to request {rid}")
        return rid, reply

    def _read_line(self) -> str:
        deadline = time.monotonic() + self.timeout
        with selectors.DefaultSelector() as sel:
            sel.register(self._stdout, selectors.EVENT_READ)
            while b"\n" not in self._buffer:
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    self.close()
                    raise CandidateTimeoutError(
                        f"no reply within {self.timeout} s from {self.argv}"
                    )
                chunk = os.read(self._stdout.fileno(), 1 << 16)
                if not chunk:
                    raise self._crashed("closed its stdout")
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode("utf-8", errors="replace")

    def _crashed(self, what: str) -> CandidateCrashedError:
        code = self._stop()
        self._stderr.seek(0)
        tail = stderr_tail(self._stderr.read())
        self._stderr.close()
        return CandidateCrashedError(f"{self.argv} {what} (exit code {code}); stderr: {tail}")

    def _stop(self) -> int:
        """Close stdin, so a well-behaved adapter exits by itself; kill it if it does not."""
        if self._proc.poll() is None:
            try:
                self._stdin.close()
                self._proc.wait(timeout=2)
            except (OSError, subprocess.TimeoutExpired):
                self._proc.kill()
                self._proc.wait()
        return self._proc.returncode

    def close(self) -> None:
        """Stop the process."""
        self._stop()
        self._stderr.close()
