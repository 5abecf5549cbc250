"""Scenario files: the executable specification of admission semantics.

`loader` reads and checks a file (shared/scenarios/FORMAT.md, format 1),
`runner` plays its steps on an engine `State`, `report` turns the state into
the JSON result and compares it with the file's expectations.
"""
