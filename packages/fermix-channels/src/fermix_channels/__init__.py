"""First-party Fermix channels."""

__version__ = "0.1.0"
