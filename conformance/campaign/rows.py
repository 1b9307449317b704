"""A campaign's rows: their columns (`COLUMNS`, the Parquet schema), the trace key that seeds
each, the replay a failing one is shrunk to, and reading them back with pyarrow: the documented schema and the summary's
aggregates, computed on the driver when the rows are on a local file system (a Spark query
would only add seconds of planning for what pyarrow does in milliseconds).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, cast

import attrs

from pullspec.conformance.jsontypes import JSONObject
from pullspec.spec.profiles import Profile

if TYPE_CHECKING:
    import pyarrow as pa

#: The columns of a campaign row, in order: (name, type, meaning). The types are Spark SQL's;
#: conformance.campaign.spark derives the Spark and pyarrow schemas from this table.
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("seed", "BIGINT", "The seed the trace was drawn from."),
    ("area", "STRING", "The interface: one of conformance.ops.MACHINE_AREAS, or simulation."),
    ("profile", "STRING", "The RocketMQ profile the reference followed (4.7 or 4.9)."),
    ("impl", "STRING", "The candidate, as --impl named it."),
    ("ops", "INT", "Ops applied to both sides and compared (the divergent op included)."),
    ("verdict", "STRING", "PASS, DIVERGED, CRASHED, TIMEOUT or UNSUPPORTED."),
    ("divergence_kind", "STRING", "ERROR, RESULT or STATE for a DIVERGED trace, else null."),
    ("first_divergent_step", "INT", "1-based index of the op that failed, else null."),
    ("divergent_op", "STRING", "That op's name, else null."),
    ("divergent_field", "STRING", "The first differing field (e.g. msgOffsets), else null."),
    ("divergence_rules", "ARRAY<STRING>", "Rule IDs the difference points at (empty on PASS)."),
    ("rule_ids", "ARRAY<STRING>", "Rule IDs the trace's ops exercise, in catalogue order."),
    ("statuses_hit", "ARRAY<STRING>", "Statuses and codes the reference answered, sorted."),
    ("detail", "STRING", "The exception of a CRASHED/TIMEOUT/UNSUPPORTED trace, else null."),
    ("elapsed_s", "DOUBLE", "Seconds the trace took (generation, both sides, comparison)."),
    ("cpu_s", "DOUBLE", "CPU seconds the trace used: elapsed_s less the waits for a core."),
)
#: Column names, in row order.
COLUMN_NAMES: tuple[str, ...] = tuple(name for name, _, _ in COLUMNS)
#: The Parquet output is split into directories by these columns (area=…/verdict=…).
PARTITION_COLUMNS: tuple[str, ...] = ("area", "verdict")
#: Verdicts that fail a campaign.
FAILING: frozenset[str] = frozenset({"DIVERGED", "CRASHED", "TIMEOUT"})

#: One row: values in COLUMN_NAMES order (their types are COLUMNS').
Row = tuple[
    int, str, str, str, int, str,
    str | None, int | None, str | None, str | None,
    list[str], list[str], list[str], str | None, float, float,
]  # fmt: skip


class RowJSON(TypedDict):
    """A row read back as a dict (the summary's failures): COLUMNS by name."""

    seed: int
    area: str
    profile: str
    impl: str
    ops: int
    verdict: str
    divergence_kind: str | None
    first_divergent_step: int | None
    divergent_op: str | None
    divergent_field: str | None
    divergence_rules: list[str]
    rule_ids: list[str]
    statuses_hit: list[str]
    detail: str | None
    elapsed_s: float
    cpu_s: float


def as_json(row: Row) -> RowJSON:
    """`row` by column name, as the summary's failures hold the rows read back.

    Example: ``as_json(row)["verdict"]`` is ``row[5]``.
    """
    # RowJSON's keys are COLUMN_NAMES in order (tests/test_campaign_units.py checks it).
    return cast(RowJSON, dict(zip(COLUMN_NAMES, row, strict=True)))


class Group(TypedDict):
    """The totals of one (area, profile, verdict): traces, ops and seconds (a sum over no
    value is null)."""

    area: str
    profile: str
    verdict: str
    traces: int
    ops: int | None
    elapsed_s: float | None
    cpu_s: float | None


class Aggregates(TypedDict):
    """What the summary is computed from (`aggregates`, conformance.campaign.spark.aggregates):
    the groups; per area, traces per rule ID and per status; the failing rows."""

    groups: list[Group]
    rules: dict[str, dict[str, int]]
    statuses: dict[str, dict[str, int]]
    failures: list[RowJSON]


#: The whole-system lockstep's area (conformance.campaign.sim): the simulator run with the
#: reference's parts and with the candidate's, histories compared event by event.
SIMULATION = "simulation"
#: Simulator steps per seed by default (as `pullspec conform`'s simulation lockstep).
DEFAULT_SIM_STEPS = 2000


def trace_key(area: str, seed: int, profile: Profile) -> str:
    """The string seeding a trace's RandomDraw: one independent stream per (area, seed, profile)."""
    return f"campaign-{area}-{profile.value}-{seed}"


@attrs.frozen
class Replay:
    """A failing trace shrunk on the driver and saved as a vector case."""

    area: str
    profile: str
    seed: int
    verdict: str
    #: Ops in the minimal trace (the campaign's trace was cut at its first failing op).
    steps: int
    path: str
    command: str
    field: str | None
    rules: tuple[str, ...]

    def to_json(self) -> JSONObject:
        """The JSON form in the campaign's summary: the fields by name."""
        return {**attrs.asdict(self), "rules": list(self.rules)}


def _arrow_type(kind: str) -> pa.DataType:
    import pyarrow as pa

    simple = {
        "BIGINT": pa.int64(),
        "INT": pa.int32(),
        "STRING": pa.string(),
        "DOUBLE": pa.float64(),
    }
    if kind.startswith("ARRAY<") and kind.endswith(">"):
        return pa.list_(_arrow_type(kind[len("ARRAY<") : -1]))
    return simple[kind]


def schema() -> pa.Schema:
    """The pyarrow schema of a campaign row, in column order (COLUMNS)."""
    import pyarrow as pa

    return pa.schema([pa.field(name, _arrow_type(kind)) for name, kind, _ in COLUMNS])


def read_rows(path: str | Path) -> pa.Table:
    """Every row under `path` as a pyarrow Table with exactly `schema()`: the partition
    columns (area, verdict) come back from the folder names as strings."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    folders = ds.partitioning(
        pa.schema([pa.field(name, pa.string()) for name in PARTITION_COLUMNS]), flavor="hive"
    )
    table = ds.dataset(str(path), format="parquet", partitioning=folders).to_table()
    return table.select(list(COLUMN_NAMES)).cast(schema())


def _exploded(table: pa.Table, column: str) -> dict[str, dict[str, int]]:
    """Per area, how many rows list each value of the list column `column`."""
    import pyarrow as pa
    import pyarrow.compute as pc

    lists = table.column(column).combine_chunks()
    pairs = pa.table(
        {
            "area": pc.take(table.column("area"), pc.list_parent_indices(lists)),
            "k": pc.list_flatten(lists),
        }
    )
    out: dict[str, dict[str, int]] = {}
    for r in pairs.group_by(["area", "k"]).aggregate([("k", "count")]).to_pylist():
        out.setdefault(str(r["area"]), {})[str(r["k"])] = int(r["k_count"])
    return out


def aggregates(path: str | Path, max_failures: int = 200) -> Aggregates:
    """The same counts as conformance.campaign.spark.aggregates, from local Parquet."""
    import pyarrow.compute as pc

    table = read_rows(path)
    grouped = table.group_by(["area", "profile", "verdict"]).aggregate(
        [("seed", "count"), ("ops", "sum"), ("elapsed_s", "sum"), ("cpu_s", "sum")]
    )
    groups: list[Group] = [
        {
            "area": r["area"],
            "profile": r["profile"],
            "verdict": r["verdict"],
            "traces": r["seed_count"],
            "ops": r["ops_sum"],
            "elapsed_s": r["elapsed_s_sum"],
            "cpu_s": r["cpu_s_sum"],
        }
        for r in grouped.to_pylist()
    ]
    failing = table.filter(pc.is_in(table.column("verdict"), value_set=_strings(sorted(FAILING))))
    failing = failing.sort_by(
        [("first_divergent_step", "ascending"), ("area", "ascending"), ("seed", "ascending")]
    )
    return {
        "groups": groups,
        "rules": _exploded(table, "rule_ids"),
        "statuses": _exploded(table, "statuses_hit"),
        "failures": failing.slice(0, max_failures).to_pylist(),
    }


def _strings(values: list[str]) -> pa.Array:
    import pyarrow as pa

    return pa.array(values, pa.string())
