"""The contracts between notebooks: one typed, versioned JSON sidecar per notebook run.

Why typed: figures, the report and the next notebook read these files. With free dictionaries a renamed key
became a silent ``None`` three stages later, and display labels ("seconds to outcome") doubled as data keys.
Each notebook now writes an instance of its schema; every reader gets the same classes back, or one line naming
the file and what is wrong with it. Display labels live only in the tables built for people.

The schemas live one module per notebook (``crash_repro``, ``interface_trace``, ``patch_bench``) over
``base``; ``files`` writes and reads them. This package's namespace is their public face: readers and notebooks
import from ``eagle3lab.sidecars``.

Writes are atomic (``eagle3lab.atomic``) and carry a digest of their content; a read refuses a sidecar written
for another profile or changed after the run wrote it (``files``). ``SCHEMA_VERSION`` goes up whenever a field changes meaning; a
sidecar of another version is refused with the command that rewrites it, never half-read.
"""

from eagle3lab.sidecars.base import (
    SCHEMA_VERSION, JsonObject, Record, SparseRecord, Sidecar)
from eagle3lab.sidecars.capture import (
    HookOutcomeRecord, ForwardCaptureRecord, CaptureRecord)
from eagle3lab.sidecars.crash_repro import (
    ModelsRecord, FrameRecord, ChainLinkRecord, CrashReportRecord, CrashRecord, ControlRecord,
    PreflightCheckRecord, PreflightRecord, MemoryRecord, CrashReproSidecar, NoiseFloorRecord)
from eagle3lab.sidecars.interface_trace import (
    SkippedFile, SourceRecord, GrepHit, ContractSite, InnerOptionRecord, EntryInnerOption, MemberStatusRecord,
    ClassReportRecord, UndecidedBranch, RaiseSite, VerdictRecord, DraftRecord, LayerSetupRecord, LayerIdRow,
    LayerIdTable, AuditCounts, EntryRow, UnresolvedEntry, ConformanceRecord, FixCheckRecord,
    SeriesCheckRecord, FixRecord, RefusedFix, ReleaseFixesRecord, MeasuredAt, ModuleImport, ImportCheckRecord,
    CaptureVerification, RefusedCheck, VerificationRecord, FixesRecord, BisectRow, BisectRecord, TraceTimings,
    CaptureCall, CaptureOrderRelease, CaptureLayersRow, CaptureBisectRow, LayersCell, ReleaseSpan,
    CaptureMilestones, CaptureOrderRecord, InterfaceTraceSidecar, CaptureState)
from eagle3lab.sidecars.patch_bench import (
    ProbeRecord, ChainStepRecord, SpecArmRecord, PromptAgreementRecord, MismatchRecord, LosslessComparisonRecord,
    LosslessRecord, WorkloadPointRecord, WorkloadRecord, LayerMismatchRecord, CycleComponent, CycleAtBatchSize, PointTimeRecord,
    CycleComponentsRecord, LaunchSample, VariantCost, LaunchSpreadRecord, SamplingRecord, DispatchBranch,
    LocatedCode, DispatchGapRecord, AgreementRecord, ArmRow, BenchServingKept,
    CrossCheckRecord, HarnessChangeRecord, FindingRecord, AcceptanceRow, OfflineVsServedRow, SpeedupRow,
    PatchBenchSidecar, AgreementValue)
from eagle3lab.sidecars.vllm_same_class import (
    VllmCheckSite, VllmGate, VllmInterfaceMember, VllmInterface, VllmDefect, VllmReleaseAudit, VllmBisectRow,
    VllmArchBisect, VllmFlaggedWrapper, VllmLaunchError, VllmGateAnswer, VllmPreflightAnswer, VllmLayerRow,
    VllmRunError, VllmRootCause, VllmProbe, VllmCpuRun, VllmCpuInstall, VllmSameClassSidecar)
from eagle3lab.sidecars.files import (SCHEMAS, DIGEST_KEY, today, sidecar_path, write, read, read_if_present,
                                     content_digest, has_digest)

__all__ = [
    "SCHEMA_VERSION", "JsonObject", "Record", "SparseRecord", "Sidecar", "HookOutcomeRecord",
    "ForwardCaptureRecord", "CaptureRecord", "ModelsRecord", "FrameRecord", "ChainLinkRecord",
    "CrashReportRecord", "CrashRecord", "ControlRecord", "PreflightCheckRecord", "PreflightRecord",
    "MemoryRecord", "CrashReproSidecar", "NoiseFloorRecord", "SkippedFile", "SourceRecord", "GrepHit", "ContractSite",
    "InnerOptionRecord", "EntryInnerOption", "MemberStatusRecord", "ClassReportRecord", "UndecidedBranch",
    "RaiseSite", "VerdictRecord", "DraftRecord", "LayerSetupRecord", "LayerIdRow", "LayerIdTable", "AuditCounts",
    "EntryRow", "UnresolvedEntry", "ConformanceRecord", "FixCheckRecord", "SeriesCheckRecord", "FixRecord",
    "RefusedFix", "ReleaseFixesRecord", "MeasuredAt", "ModuleImport", "ImportCheckRecord", "CaptureVerification",
    "RefusedCheck", "VerificationRecord", "FixesRecord", "BisectRow", "BisectRecord", "TraceTimings",
    "CaptureCall", "CaptureOrderRelease", "CaptureLayersRow", "CaptureBisectRow", "LayersCell", "ReleaseSpan",
    "CaptureMilestones", "CaptureOrderRecord", "InterfaceTraceSidecar", "CaptureState", "ProbeRecord",
    "ChainStepRecord", "SpecArmRecord", "PromptAgreementRecord", "MismatchRecord", "LosslessComparisonRecord",
    "LosslessRecord", "WorkloadPointRecord", "WorkloadRecord", "LayerMismatchRecord", "CycleComponent", "CycleAtBatchSize", "PointTimeRecord",
    "CycleComponentsRecord", "LaunchSample", "VariantCost", "LaunchSpreadRecord", "SamplingRecord",
    "DispatchBranch", "LocatedCode", "DispatchGapRecord", "AgreementRecord", "ArmRow",
    "BenchServingKept", "CrossCheckRecord", "HarnessChangeRecord", "FindingRecord", "AcceptanceRow",
    "OfflineVsServedRow", "SpeedupRow", "PatchBenchSidecar", "AgreementValue", "VllmCheckSite", "VllmGate",
    "VllmInterfaceMember", "VllmInterface", "VllmDefect", "VllmReleaseAudit", "VllmBisectRow", "VllmArchBisect",
    "VllmFlaggedWrapper", "VllmLaunchError", "VllmGateAnswer", "VllmPreflightAnswer", "VllmLayerRow", "VllmRunError",
    "VllmRootCause", "VllmProbe", "VllmCpuRun", "VllmCpuInstall", "VllmSameClassSidecar", "SCHEMAS", "DIGEST_KEY", "today", "sidecar_path", "write", "read", "read_if_present",
    "content_digest", "has_digest"]
