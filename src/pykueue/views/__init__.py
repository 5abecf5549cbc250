"""What users read, shared by both homes: the dashboard (`dashboard`, `dashboard_data`,
`dashboard_objects`, ``static/``), the rows of ``get`` and ``describe`` (`rows`) and pending
lists (`visibility`)."""
