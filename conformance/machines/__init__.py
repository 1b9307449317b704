"""Lockstep stateful Hypothesis machines, one per interface (area): `run.run_machine` runs one.

`gen` and `client_gen` draw configs and ops (through `draw`), `lockstep` is the machine and its
report, `minimize` shortens a failing trace, `edges` holds the hand-picked edge cases and
`simulation` is the whole-system lockstep (the simulator with the reference's parts against the
candidate's).
"""
