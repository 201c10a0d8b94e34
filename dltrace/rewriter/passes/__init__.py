"""The rewriter's passes, one module each, in sqlglot's optimizer style.

Each pass is ``pass(expression, context, copy=True) -> expression``: it takes a query tree and a
:class:`~dltrace.rewriter.passes.context.PassContext`, and returns a new tree (it never mutates its input).
``copy=False`` (sqlglot's builder convention) lets it change its input in place instead: the pipelines pass it
for the tree they copied once at the start, which spares a copy of the whole tree per pass (half the time of
rewriting a TPC-H query). A pass with nothing to do returns its input as it is.
The analysis passes (:data:`dltrace.rewriter.analysis.ANALYSIS_PASSES`) bring a query into the one form both
forward rewriting and backward tracing read; the forward passes (:data:`dltrace.rewriter.FORWARD_PASSES`)
add the lineage columns.
"""
