"""fast: mmap + numpy implementations of the spec protocols (RocketMQ's on-disk format).

Never imports `reference`; the conformance suite diffs the two.
"""
