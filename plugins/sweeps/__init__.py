"""Sweeps as researchers run them: one parent run per sweep with a child per job (a Hydra callback,
`parent.SweepParentRun`, in conf/config.yaml's hydra.callbacks), every job's config checked before
the first runs (`checks`), jobs that end with the sweep's process (`orphans`) and `seeds=N` on the
command line (`seeds`, a command-line expansion). The core's side of a sweep's job is
framework.contracts.sweeper."""
