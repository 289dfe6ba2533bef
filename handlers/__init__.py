"""Thin Lambda entry points over the jobguard library."""
