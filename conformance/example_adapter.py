"""A tiny subprocess adapter: serves a Python candidate over the JSON Lines protocol.

    python -m pullspec.conformance.example_adapter [--impl reference]

It is the protocol of docs/protocol.md in its simplest form, and the suite's own test of the
`cmd:` path: `pullspec conform --impl cmd:"python -m pullspec.conformance.example_adapter"` runs the
reference on the other side of a pipe. An adapter in another language does the same: read a
request line, run it, write one reply line, flush.

Each request is answered through the vector adapters (conformance.adapters), so the observation
it writes back is exactly what `pullspec vectors check` would compare.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import IO

from pullspec.conformance.candidates import Candidate
from pullspec.conformance.jsontypes import JSONObject, as_object, is_object, to_int
from pullspec.conformance.observe import Session
from pullspec.conformance.ops import Op
from pullspec.conformance.remote.channel import Reply
from pullspec.conformance.resolve import resolve
from pullspec.spec.errors import ErrorKind, PullspecError
from pullspec.spec.profiles import Profile

#: How many instances the adapter keeps (the oldest is forgotten first).
LIVE_INSTANCES = 16


def _reply(request: JSONObject, sessions: dict[int, Session], candidate: Candidate) -> Reply:
    rid = request.get("id")
    if request.get("op") == "create":
        # The suite interleaves at most a few instances (the simulation's master and slave
        # stores): the newest LIVE_INSTANCES are kept.
        while len(sessions) >= LIVE_INSTANCES:
            del sessions[next(iter(sessions))]
        profile = Profile.parse(str(request.get("profile", "4.9")))
        config = as_object(request.get("config") or {})
        sessions[to_int(rid or 0)] = Session(
            candidate, str(request.get("area")), config, profile, Path(".")
        )
        return {"id": rid, "ok": {}}
    session = sessions.get(to_int(request.get("instance") or 0))
    if session is None:
        return {
            "id": rid,
            "error": {"kind": ErrorKind.INVALID_ARGUMENT.value, "message": "no such instance"},
        }
    observation = session.apply(Op(str(request.get("op")), as_object(request.get("args") or {})))
    return {"id": rid, "ok": observation.to_json()}


def serve(candidate: Candidate, lines: Iterable[str], out: IO[str]) -> None:
    """Answer every request line of `lines` on `out`, one reply line each, until EOF."""
    sessions: dict[int, Session] = {}
    for line in lines:
        if not line.strip():
            continue
        request: object = json.loads(line)
        if not is_object(request):
            raise TypeError(f"a request must be a JSON object, not {line.strip()[:80]!r}")
        reply: Reply
        try:
            reply = _reply(request, sessions, candidate)
        except PullspecError as exc:  # UnsupportedError included: its kind is UNSUPPORTED
            reply = {
                "id": request.get("id"),
                "error": {"kind": exc.kind.value, "message": str(exc)},
            }
        out.write(json.dumps(reply, separators=(",", ":")) + "\n")
        out.flush()


def main(argv: list[str] | None = None) -> None:
    """Serve `--impl` (default: the reference) on stdin/stdout."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--impl", default="reference", help="the Python candidate to serve")
    args = parser.parse_args(argv)
    serve(resolve(args.impl), sys.stdin, sys.stdout)


if __name__ == "__main__":
    main()
