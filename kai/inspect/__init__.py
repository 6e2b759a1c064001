"""A running cluster as people ask about it: the layer under `kai queues`, `kai why`, `kai nodes`.

The summarisers (`queues`, `why`, `nodes`) are pure: object dicts in, table rows and
JSON-ready documents out. They read every field through `kai.api`'s parsers and count
devices with the engine's own capacity rule, so a number shown is the number the
scheduler works with; a malformed object becomes a line naming it and the field, never
an exception. `read` is the only module that talks to an API server.
"""
