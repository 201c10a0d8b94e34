"""The rewriter's passes, one module each, in sqlglot's optimizer style.

Each pass is ``pass(expression, context) -> expression``: it takes a query tree and a
:class:`~dltrace.rewriter.passes.context.PassContext`, and returns a new tree (it never mutates its input).
The analysis passes (:data:`dltrace.rewriter.analysis.ANALYSIS_PASSES`) bring a query into the one form both
forward rewriting and backward tracing read; the forward passes (:data:`dltrace.rewriter.FORWARD_PASSES`)
add the lineage columns.
"""
