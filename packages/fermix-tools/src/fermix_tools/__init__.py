"""First-party Fermix tools."""

__version__ = "0.1.0"
