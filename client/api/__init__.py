"""API declarations: every RPC method declared once; server dispatch and stubs derive from it."""
