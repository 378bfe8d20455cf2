"""What the plugins that serve a page (the fighter, the Gomoku play page) share: no plugin of its own,
a library their servers use, so that a per-run token is guarded one way."""
