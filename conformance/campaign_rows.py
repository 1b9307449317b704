"""Reading a campaign's Parquet rows back with pyarrow: the documented schema and the summary's
aggregates, computed on the driver when the rows are on a local file system (a Spark query
would only add seconds of planning for what pyarrow does in milliseconds).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pullspec.conformance.campaign import COLUMN_NAMES, COLUMNS, FAILING, PARTITION_COLUMNS


def _arrow_type(kind: str) -> Any:
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


def schema() -> Any:
    """The pyarrow schema of a campaign row, in column order (COLUMNS)."""
    import pyarrow as pa

    return pa.schema([pa.field(name, _arrow_type(kind)) for name, kind, _ in COLUMNS])


def read_rows(path: str | Path) -> Any:
    """Every row under `path` as a pyarrow Table with exactly `schema()`: the partition
    columns (area, verdict) come back from the folder names as strings."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    folders = ds.partitioning(
        pa.schema([pa.field(name, pa.string()) for name in PARTITION_COLUMNS]), flavor="hive"
    )
    table = ds.dataset(str(path), format="parquet", partitioning=folders).to_table()
    return table.select(list(COLUMN_NAMES)).cast(schema())


def _exploded(table: Any, column: str) -> dict[str, dict[str, int]]:
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


def aggregates(path: str | Path, max_failures: int = 200) -> dict[str, Any]:
    """The same counts as conformance.campaign_spark.aggregates, from local Parquet."""
    import pyarrow.compute as pc

    table = read_rows(path)
    grouped = table.group_by(["area", "profile", "verdict"]).aggregate(
        [("seed", "count"), ("ops", "sum"), ("elapsed_s", "sum"), ("cpu_s", "sum")]
    )
    groups = [
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


def _strings(values: list[str]) -> Any:
    import pyarrow as pa

    return pa.array(values, pa.string())
