"""The standalone HTTP API: routes (`app`), who may call them (`auth`, `peer`), ``apply``
(`applying`, `apply_parsing`) under the config's `limits`, and policy history (`policy`)."""
