"""The cost model against published speedup measurements, under a protocol that can fail.

``data/spec_validation.yaml`` splits its sources into development and held-out ones (``protocol``, recorded with
its date before anything was fitted). The acceptance length is never fitted where a source publishes it; where it
is not published it is fitted to the single-stream speedup and the series tests only the shape against batch size
("fitted acceptance, shape-only"). The only fitted constants, the engine's orchestration per cycle and per draft
step (``fit_orchestration``), are fitted on development points with published acceptance and stored frozen with a
date; held-out sources are evaluated with those frozen constants and give the out-of-sample MAPE. A second
held-out set (``protocol.held_out_2``: sources found after the constants were frozen, recorded with its own date)
is evaluated the same way and reported as its own group, never merged into the first. Beside every MAPE: the
naive baselines ("flat": the speedup stays at its single-stream value; "free cycle": the speedup equals
the acceptance length). Trends are judged point by point (each step from one batch size to the next).

One module per step: ``schema`` (the data set and the protocol's constants), ``evaluate`` (the model on each series),
``fit`` (the frozen constants), ``tables`` (the results and ``validation_report``). This package's namespace is
the public face.
"""

from eagle3lab.costmodel.validation.schema import (DATASET, GOAL_MAPE_PCT, TREND_TOLERANCE, CALIBRATIONS,
                                                   FIRST_BATCH_CALIBRATION, CALIBRATION_AT_BOUND, SPLITS,
                                                   HELD_OUT_SETS, SHAPE_ONLY, PUBLISHED, Flags, BaselineOnly,
                                                   CalibrateFrom, Series, Source, PublicCheck, Frozen, HeldOutSet,
                                                   Protocol, Dataset, PastEvaluation, load_dataset)
from eagle3lab.costmodel.validation.evaluate import (ValidationPoint, SeriesResult, SourceResult, trend, trend_steps,
                                                     frozen_engine, validate)
from eagle3lab.costmodel.validation.fit import (ORCHESTRATION_FIELDS, FIRST_FREEZE_FIELDS, development_only,
                                                fit_orchestration)
from eagle3lab.costmodel.validation.tables import (validation_points, validation_summary, NAIVE_BASELINES,
                                                   OUT_OF_SAMPLE, OUT_OF_SAMPLE_2, OUT_OF_SAMPLE_3,
                                                   OUT_OF_SAMPLE_ROLES, FIT_QUALITY, FIT_QUALITY_FIRST,
                                                   SHAPE_ONLY_ROLE, group_role, step_sweeps, set_conditions,
                                                   validation_report, trend_table, context_sensitivity,
                                                   current_report, SEEN_ROLE, SET_LABELS)

__all__ = ["DATASET", "GOAL_MAPE_PCT", "TREND_TOLERANCE", "CALIBRATIONS", "FIRST_BATCH_CALIBRATION",
           "CALIBRATION_AT_BOUND", "SPLITS", "HELD_OUT_SETS", "SHAPE_ONLY", "PUBLISHED", "Flags", "BaselineOnly",
           "CalibrateFrom", "Series", "Source", "PublicCheck", "Frozen", "HeldOutSet", "Protocol", "Dataset",
           "load_dataset", "ValidationPoint", "SeriesResult", "SourceResult", "trend", "trend_steps", "frozen_engine",
           "validate", "ORCHESTRATION_FIELDS", "FIRST_FREEZE_FIELDS", "development_only", "fit_orchestration",
           "validation_points", "validation_summary", "NAIVE_BASELINES", "OUT_OF_SAMPLE", "OUT_OF_SAMPLE_2",
           "OUT_OF_SAMPLE_3", "OUT_OF_SAMPLE_ROLES", "FIT_QUALITY", "FIT_QUALITY_FIRST", "SHAPE_ONLY_ROLE",
           "group_role", "step_sweeps", "set_conditions", "validation_report", "trend_table", "context_sensitivity",
           "current_report", "SEEN_ROLE", "SET_LABELS", "PastEvaluation"]
