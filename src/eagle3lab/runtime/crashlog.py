"""Python tracebacks out of sglang server logs, turned into structured, classified crash reports.

sglang prints the real error from the scheduler subprocess (``Scheduler hit an exception: Traceback ...``),
interleaved with log lines from other processes, and then the launcher adds tracebacks of its own about a child
having died. With TP > 1 every rank prints the same traceback. The report keeps the first root-cause traceback,
names the runtime line that made the failing call, and classifies it. An error no rule recognises is reported
as ``unknown`` and shown verbatim: forcing it into a class would hide exactly what a debugger needs to see.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Literal

Category = Literal["interface_gap", "cpu_limitation", "environment", "unknown"]

TRACEBACK_START = "Traceback (most recent call last):"
FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<function>.+)$')
EXCEPTION_LINE = re.compile(r"^(?P<type>[A-Za-z_][\w.]*)(?::\s?(?P<message>.*))?$")
LOG_LINE = re.compile(r"^\s*\[\d{4}-\d\d-\d\d[ T]|^\s*\[\w+\]|^(INFO|WARNING|ERROR|DEBUG)[: ]")
CARETS = re.compile(r"^\s*[~^]+\s*$")
MISSING_ATTRIBUTE = re.compile(r"^'(?P<cls>[\w.]+)' object has no attribute '(?P<attr>\w+)'")
MODEL_CLASS = re.compile(r"(ForConditionalGeneration|ForCausalLM\w*|Model|Eagle3?)$")
CHAIN_MARKERS = ("During handling of the above exception", "The above exception was the direct cause")
# The launcher's own reactions to a dead child; they are consequences, never the root cause.
CONSEQUENCES = (
    re.compile(r"Initialization failed|Rank \d+ scheduler is dead|child failed|Received sigquit"),
)


@dataclass
class Frame:
    path: str          # sglang-relative where the file is inside the sglang package
    line: int
    function: str
    code: str = ""

    @property
    def in_sglang(self) -> bool:
        return self.path.startswith("sglang/")

    def __str__(self) -> str:
        return f"{self.path}:{self.line} in {self.function}"


@dataclass
class ParsedTraceback:
    frames: list[Frame]
    exc_type: str
    message: str
    text: str


@dataclass(frozen=True)
class Rule:
    """One known failure: which exception, which message, and what it means."""

    name: str
    category: Category
    exc_types: tuple[str, ...]
    message: re.Pattern
    explanation: str


RULES: tuple[Rule, ...] = (
    Rule("eagle_backend_cpu", "cpu_limitation", ("ValueError",),
         re.compile(r"EAGLE is not supported in (decode|prefill) attention backend"),
         "sglang 0.5.9 offers no speculative-decoding attention backend without a GPU/NPU"),
    Rule("spec_harness_unsupported", "cpu_limitation", ("SpeculativeCpuError",),
         re.compile(r"CPU harness runs EAGLE with"),
         "the CPU harness runs sglang's EAGLE loop with topk 1 and page size 1 only (topk > 1 needs the draft "
         "tree's attention mask, which torch_native does not apply); other settings need a GPU"),
    Rule("no_triton_driver", "cpu_limitation", ("RuntimeError",),
         re.compile(r"0 active drivers"), "a Triton kernel was launched but no GPU driver is present"),
    Rule("no_cuda", "cpu_limitation", ("RuntimeError", "AssertionError", "AttributeError"),
         re.compile(r"Torch not compiled with CUDA|No CUDA GPUs are available|Found no NVIDIA driver|"
                    r"CUDA driver initialization failed|cuda.*not available", re.I),
         "a CUDA-only code path ran on a machine without a GPU"),
    Rule("missing_shared_library", "environment", ("ImportError", "OSError"),
         re.compile(r"cannot open shared object file|undefined symbol"),
         "a native library is missing or does not match (for the cpu profile: build the stub libcuda)"),
    Rule("missing_module", "environment", ("ModuleNotFoundError", "ImportError"), re.compile(r".*"),
         "a Python package is missing or broken; re-run the set-up"),
    Rule("cudnn_check", "environment", ("RuntimeError",), re.compile(r"CuDNN Compatibility"),
         "sglang's torch/cuDNN version check; set SGLANG_DISABLE_CUDNN_CHECK=1 on CPU"),
    Rule("processor_missing", "environment", ("ValueError", "OSError"),
         re.compile(r"Unrecognized processing class|Can't load tokenizer"),
         "the model directory lacks tokenizer/processor files"),
)


@dataclass
class CrashReport:
    """The structured view of one crash, ready for a table or a JSON sidecar."""

    exc_type: str
    message: str
    category: Category
    rule: str | None
    explanation: str
    object_class: str | None
    missing_attribute: str | None
    call_site: Frame | None
    frames: list[Frame]
    traceback_text: str
    tracebacks_found: int
    distinct_tracebacks: int
    extra: dict = field(default_factory=dict)

    @property
    def signature(self) -> str:
        return f"{self.exc_type}: {self.message}"

    def to_dict(self) -> dict:
        data = asdict(self)
        data["signature"] = self.signature
        data["call_site"] = str(self.call_site) if self.call_site else None
        return data


def sglang_relative(path: str) -> str:
    """``/.../site-packages/sglang/srt/x.py`` -> ``sglang/srt/x.py``; other paths stay as they are."""
    normalised = path.replace("\\", "/")
    marker = normalised.rfind("/sglang/")
    if marker >= 0 and normalised.endswith(".py"):
        return normalised[marker + 1:]
    return normalised


def _after_start(line: str) -> bool:
    return line.rstrip().endswith(TRACEBACK_START)


def extract_tracebacks(log_text: str) -> list[ParsedTraceback]:
    """Every Python traceback in a log, skipping interleaved log lines from other processes."""
    lines = log_text.splitlines()
    found: list[ParsedTraceback] = []
    i = 0
    while i < len(lines):
        if not _after_start(lines[i]):
            i += 1
            continue
        frames: list[Frame] = []
        body = [TRACEBACK_START]
        i += 1
        while i < len(lines):
            line = lines[i]
            frame = FRAME.match(line)
            if frame:
                frames.append(Frame(sglang_relative(frame["path"]), int(frame["line"]), frame["function"].strip()))
                body.append(line)
            elif line.startswith("    ") and frames and not CARETS.match(line):
                if not frames[-1].code:
                    frames[-1].code = line.strip()
                body.append(line)
            elif CARETS.match(line) or LOG_LINE.match(line) or not line.strip():
                pass  # a caret marker, another process's log line, or a blank line inside the traceback
            else:
                exc = EXCEPTION_LINE.match(line.strip())
                if exc and frames:
                    body.append(line)
                    found.append(ParsedTraceback(frames, exc["type"], (exc["message"] or "").strip(),
                                                 "\n".join(body)))
                    break
            i += 1
        i += 1
    return found


def _is_consequence(tb: ParsedTraceback) -> bool:
    return any(pattern.search(tb.message) for pattern in CONSEQUENCES)


def _match_rule(tb: ParsedTraceback) -> Rule | None:
    short = tb.exc_type.rsplit(".", 1)[-1]
    for rule in RULES:
        if short in rule.exc_types and rule.message.search(tb.message):
            return rule
    return None


def _classify(tb: ParsedTraceback) -> tuple[Category, Rule | None, str, str | None, str | None]:
    missing = MISSING_ATTRIBUTE.match(tb.message) if tb.exc_type.endswith("AttributeError") else None
    if missing and MODEL_CLASS.search(missing["cls"]):
        return ("interface_gap", None,
                f"the runtime asked the model object {missing['cls']} for '{missing['attr']}', which it lacks",
                missing["cls"], missing["attr"])
    rule = _match_rule(tb)
    if rule:
        return rule.category, rule, rule.explanation, missing["cls"] if missing else None, \
            missing["attr"] if missing else None
    return "unknown", None, "no known rule matches; read the traceback verbatim", \
        missing["cls"] if missing else None, missing["attr"] if missing else None


def _call_site(frames: list[Frame]) -> Frame | None:
    """The innermost frame in sglang's own code: where the runtime made the call that failed."""
    inside = [frame for frame in frames if frame.in_sglang]
    return inside[-1] if inside else (frames[-1] if frames else None)


def crash_report(log_text: str) -> CrashReport | None:
    """The root-cause crash of a server log, or None if the log holds no traceback."""
    tracebacks = extract_tracebacks(log_text)
    if not tracebacks:
        return None
    roots = [tb for tb in tracebacks if not _is_consequence(tb)] or tracebacks
    primary = roots[0]
    category, rule, explanation, cls, attr = _classify(primary)
    distinct = {(tb.exc_type, tb.message, str(tb.frames[-1])) for tb in tracebacks}
    return CrashReport(
        exc_type=primary.exc_type, message=primary.message, category=category,
        rule=rule.name if rule else None, explanation=explanation, object_class=cls, missing_attribute=attr,
        call_site=_call_site(primary.frames), frames=primary.frames, traceback_text=primary.text,
        tracebacks_found=len(tracebacks), distinct_tracebacks=len(distinct))
