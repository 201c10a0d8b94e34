"""One module per operator: each turns a query node whose inputs carry lineage slots into one whose
outputs do. Composed bottom-up by :mod:`dltrace.rewriter.passes.instrument`."""
