"""Tests of the framework core and its built-in plugins."""
