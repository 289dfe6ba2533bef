"""Minimal Lambda handler modules, imported by a fresh interpreter for the cold start figure."""
