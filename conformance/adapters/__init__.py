"""Vector adapters: one module per area maps the vectors' camelCase steps to a candidate's API."""
