"""Python tracebacks out of sglang server logs, turned into structured, classified crash reports.

sglang prints the real error from the scheduler subprocess (``Scheduler hit an exception: Traceback ...``),
interleaved with log lines from other processes, and then the launcher adds tracebacks of its own about a child
having died. With TP > 1 every rank prints the same traceback. The report keeps the first root-cause crash,
names the runtime line that made the failing call, and classifies it.

A chained exception (``raise ... from``, or an error while handling another) is printed oldest first; its last
error is the one that says what went wrong at the level the user acts on ("couldn't find them in the cached
files"), while the first is often a low-level symptom ("Name or service not known"). So the last error of a chain
is reported as the crash and the whole chain is kept. Exception messages that span several lines (sgl_kernel's
ImportError starts with an empty line) are kept whole. An error no rule recognises is reported as ``unknown`` and
shown verbatim: forcing it into a class would hide exactly what a debugger needs to see.
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
# Lines that end a multi-line exception message: a timestamped log line or a Python warning. (A bracketed word
# such as "[sgl_kernel] CRITICAL" can be part of a message, so LOG_LINE is too broad here.)
TIMESTAMPED_LOG = re.compile(r"^\s*\[\d{4}-\d\d-\d\d[ T]|^(INFO|WARNING|ERROR|DEBUG)[: ]")
PY_WARNING = re.compile(r"^\S[^:]*:\d+: \w*Warning\b")
MAX_MESSAGE_LINES = 80
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
    message: str  # whole, also when it spans several lines
    text: str
    chain: int = 0  # tracebacks printed as one chained exception share this number
    link: str | None = None  # how it follows the previous one of its chain: "cause" or "context"

    @property
    def headline(self) -> str:
        """The first non-empty line of the message (for one-line displays)."""
        return next((line.strip() for line in self.message.splitlines() if line.strip()), "")


@dataclass(frozen=True)
class Rule:
    """One known failure: which exception, which message, and what it means."""

    name: str
    category: Category
    exc_types: tuple[str, ...]
    message: re.Pattern
    explanation: str
    fix: str | None = None  # a command or setting; ``{profile}`` is the profile's name


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
    Rule("model_not_available_offline", "environment", ("OSError", "LocalEntryNotFoundError", "EnvironmentError"),
         re.compile(r"couldn't find (them|it) in the cached files|Cannot find the requested files in the "
                    r"(disk|local) cache|outgoing traffic has been disabled|couldn't connect to '[^']*' to load",
                    re.I),
         "the model is neither a local directory nor in the Hugging Face cache, and the hub was not reachable "
         "(launches run offline)", "python -m eagle3lab fetch-models --profile {profile}"),
    Rule("missing_shared_library", "environment", ("ImportError", "OSError"),
         re.compile(r"cannot open shared object file|undefined symbol"),
         "a native library is missing or does not match (for the cpu profile: build the stub libcuda)",
         "python -m eagle3lab setup --profile {profile}"),
    Rule("missing_module", "environment", ("ModuleNotFoundError", "ImportError"), re.compile(r".*"),
         "a Python package is missing or broken; re-run the set-up", "make setup"),
    Rule("cudnn_check", "environment", ("RuntimeError",), re.compile(r"CuDNN Compatibility"),
         "sglang's torch/cuDNN version check; set SGLANG_DISABLE_CUDNN_CHECK=1 on CPU",
         "SGLANG_DISABLE_CUDNN_CHECK=1"),
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
    fix: str | None = None  # what to run or set, when the rule knows
    chain: list[dict] = field(default_factory=list)  # the reported error's chain, oldest first (it is the last)
    classified_by: str | None = None  # the chain member whose rule decided the category, if not the last
    extra: dict = field(default_factory=dict)

    @property
    def headline(self) -> str:
        return next((line.strip() for line in self.message.splitlines() if line.strip()), "")

    @property
    def signature(self) -> str:
        """One line: the exception type and the first non-empty line of its message."""
        return f"{self.exc_type}: {self.headline}"

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


def _chain_link(line: str) -> str | None:
    if CHAIN_MARKERS[0] in line:
        return "context"
    if CHAIN_MARKERS[1] in line:
        return "cause"
    return None


def _ends_message(line: str) -> bool:
    return (_after_start(line) or _chain_link(line) is not None or bool(TIMESTAMPED_LOG.match(line))
            or bool(PY_WARNING.match(line)) or bool(FRAME.match(line)))


def _message_tail(lines: list[str], start: int) -> list[str]:
    """The lines after an exception line that still belong to its message (trailing blank lines dropped)."""
    tail: list[str] = []
    for line in lines[start:start + MAX_MESSAGE_LINES]:
        if _ends_message(line):
            break
        tail.append(line.rstrip())
    while tail and not tail[-1].strip():
        tail.pop()
    return tail


def extract_tracebacks(log_text: str) -> list[ParsedTraceback]:
    """Every Python traceback in a log, skipping interleaved log lines from other processes; tracebacks joined by
    "The above exception was the direct cause ..." or "During handling ..." share a chain number."""
    lines = log_text.splitlines()
    found: list[ParsedTraceback] = []
    chain, pending_link = -1, None
    i = 0
    while i < len(lines):
        link = _chain_link(lines[i])
        if link and found:
            pending_link = link
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
                    tail = _message_tail(lines, i + 1)
                    message = "\n".join([(exc["message"] or "").strip(), *tail]).strip()
                    body += [line, *tail]
                    if pending_link is None:
                        chain += 1
                    found.append(ParsedTraceback(frames, exc["type"], message, "\n".join(body), chain,
                                                 pending_link))
                    pending_link = None
                    i += len(tail)
                    break
            i += 1
        i += 1
    return found


def chains(tracebacks: list[ParsedTraceback]) -> list[list[ParsedTraceback]]:
    """Tracebacks grouped by chain, each oldest first, in the order they were printed."""
    grouped: dict[int, list[ParsedTraceback]] = {}
    for tb in tracebacks:
        grouped.setdefault(tb.chain, []).append(tb)
    return list(grouped.values())


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


def _chain_entry(tb: ParsedTraceback) -> dict:
    site = _call_site(tb.frames)
    return {"exc_type": tb.exc_type, "message": tb.message, "link": tb.link,
            "call_site": str(site) if site else None}


def crash_report(log_text: str, profile: str | None = None) -> CrashReport | None:
    """The root-cause crash of a server log, or None if the log holds no traceback.

    The first chain whose last error is not the launcher's reaction to a dead child is the crash; its last error
    is reported, classified by the first rule that matches it or, failing that, an earlier error of its chain.
    ``profile`` fills the profile's name into the fix a rule suggests.
    """
    tracebacks = extract_tracebacks(log_text)
    if not tracebacks:
        return None
    all_chains = chains(tracebacks)
    roots = [chain for chain in all_chains if not _is_consequence(chain[-1])] or all_chains
    chain = roots[0]
    primary = chain[-1]
    category, rule, explanation, cls, attr = _classify(primary)
    classified_by = None
    if category == "unknown":
        for earlier in reversed(chain[:-1]):
            candidate = _classify(earlier)
            if candidate[0] != "unknown":
                category, rule, explanation, cls, attr = candidate
                classified_by = f"{earlier.exc_type}: {earlier.headline}"
                break
    distinct = {(c[-1].exc_type, c[-1].message, str(c[-1].frames[-1])) for c in all_chains}
    fix = rule.fix.format(profile=profile or "<profile>") if rule and rule.fix else None
    return CrashReport(
        exc_type=primary.exc_type, message=primary.message, category=category,
        rule=rule.name if rule else None, explanation=explanation, object_class=cls, missing_attribute=attr,
        call_site=_call_site(primary.frames), frames=primary.frames,
        traceback_text="\n\n".join(tb.text for tb in chain), tracebacks_found=len(tracebacks),
        distinct_tracebacks=len(distinct), fix=fix, chain=[_chain_entry(tb) for tb in chain],
        classified_by=classified_by)
