"""The standalone server: HTTP API (`app`), access control (`auth`), ``apply`` (`applying`),
the rows of ``get``/``describe`` (`views`), and `runtime`, which runs it all in one process.

`python -m pykueue.server` is the program `pykueue up` becomes (the CLI and the
server are separate layers: the CLI only launches it and talks to it over HTTP).
"""
