"""Tests of the fighter game plugin."""
