"""Puts tests/ on the import path, for helpers shared by several test folders
(`synthetic_runs`)."""
