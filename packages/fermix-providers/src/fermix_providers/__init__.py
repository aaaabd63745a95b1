"""First-party Fermix providers.

One registration module per provider (``fermix_providers.<name>.plugin``), each exposed
through its own ``fermix`` entry point, so disabling one provider never touches another.
The registration modules import nothing heavy; the adapters their specs name are imported
only when a route uses them. The shared static model catalog is
:mod:`fermix_providers.catalog`.
"""

__version__ = "0.1.0"
