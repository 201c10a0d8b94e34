"""dltrace's version, in a module of its own so that what records it (saved lineage manifests) need not import
the package's top."""

__version__ = "0.1.0"
