"""Candidates in another process (`--impl cmd:"<command>"`), spoken to in JSON Lines
(docs/protocol.md): `candidate.SubprocessCandidate` and the objects forwarding each call as a
vector op over its `channel.Channel`."""
