"""`python -m framework plugins`: what is installed, read from the registry's entry points and the
config files, without importing a plugin. A command plugin (the `framework.commands` group) like
any other: the core only lists and runs commands."""
