"""Ray for the plugins that run actors (the `ray_async` search's inference actors, the AlphaZero
agent's self-play workers): the `ray` section's run service, the local Ray a run starts and stops
(its reaper), a cluster's address, and the restarts of actors counted once. A library those plugins
share, as `web` is for the pages: its one plugin is the `ray` service."""
