"""Campaigns (`pullspec campaign`, docs/using/campaigns.md): many seeded lockstep traces on Spark.

`rows` (the row's columns, trace keys, replays, reading rows back), `run` (one trace per seed,
area and profile), `sim` (the whole-system lockstep's rows), `shrink` (a failing trace cut to a
vector case), `spark` (the job), `summary`, `report` and `svg` (what the driver writes).
"""
