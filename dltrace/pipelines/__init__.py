"""Lineage through a whole pipeline: a Spark Declarative Pipelines project or a folder of ``CREATE ... AS``
files, read into a dataflow graph (:mod:`.graph`) and run step by step with end-to-end lineage (:mod:`.run`)."""

from __future__ import annotations

from dltrace.pipelines.graph import Pipeline, Step, read_pipeline
from dltrace.pipelines.run import METHODS, PipelineResult, run_pipeline

__all__ = ["METHODS", "Pipeline", "PipelineResult", "Step", "read_pipeline", "run_pipeline"]
