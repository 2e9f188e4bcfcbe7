"""The read-only web dashboard at `/ui/` (docs/observability.md): one page, no build step, nothing
fetched from outside lw-rapi.

`static/` holds the page (HTML, CSS, JavaScript, served by `rapi.observe`); `view` turns
what the daemons answer into the document the page renders; `live` gathers it and streams
a fresh one over server-sent events whenever something changed.
"""
