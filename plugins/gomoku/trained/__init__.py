"""Trained Gomoku agents that ship with the package, each a checkpoint in a folder of its own
(written by `python -m framework_plugins.alphazero.ship`, registered in the entry-point group
`framework.trained`): `python -m framework play NAME`, `gomocup NAME`."""
