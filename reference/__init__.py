"""The reference model: the simplest correct, deterministic implementation of each spec protocol.

Every behaviour is obtained by calling the spec's rule functions; time comes from an injected
`spec.Clock`; there are no threads and no sleeping.
"""
