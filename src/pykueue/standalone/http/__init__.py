"""The standalone HTTP API: `app` assembles one router per resource (`routes`), each route handed
the server (`context.Ctx`) and its caller (`context.Caller`) as dependencies; who may call them
(`auth`, `peer`), ``apply`` (`applying`, `apply_parsing`) under the config's `limits`, and
policy history (`policy`)."""
