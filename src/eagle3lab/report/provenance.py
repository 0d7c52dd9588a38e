"""Checks that a rendered report carries no number its evidence does not hold, and no number without a tag.

Why: REPORT.md is read as the project's answer. A number typed into the template or into a sentence in code
silently outlives the run that should have produced it. These checks read the rendered text the way a reviewer
would: every numeric token outside code must be a formatted value of the evidence (the typed sidecars, the
model's evidence, the incident's reported figures), and every block of text that shows a number must say where
it comes from ([measured], [reported], [modelled] or [traced]).

A token matches the evidence when
- it has decimals and equals some evidence number formatted to that many decimals (``1.67`` from 1.6705);
- it is an integer and equals an integral evidence number, or the rounding of one of at least 100 (``1,643``);
- it appears as a token of an evidence string (a log line, a version, a date, a label made from values);
- it counts the items of an evidence list, or the items sharing the values of one or two of their keys
  (how many call sites of each kind on each object).
Numbers only structure allows are exempt: a heading's ordinal and the notebooks' own numbers (01, 02, 03).
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Optional, Sequence

from pydantic import BaseModel

TAGS = ("[measured]", "[reported]", "[modelled]", "[traced]")
_TAG = re.compile(r"\[(measured|reported|modelled|traced)\]")

_FENCE = re.compile(r"^```.*?^```[^\n]*$", re.MULTILINE | re.DOTALL)
_CODE = re.compile(r"`[^`\n]*`")
_IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)")
_LINK_TARGET = re.compile(r"(?<=\])\([^)]*\)")
_URL = re.compile(r"https?://\S+")
_HEADING_ORDINAL = re.compile(r"^(#+\s+)\d+\.", re.MULTILINE)
_STRIP = "()[]{}<>,;:!?*\"'|_~"
_NUMBER = re.compile(r"^[-+\u2212]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?$")
_LITERAL = re.compile(r"^\d+(?:\.\d+){2,}$|^\d{4}-\d{2}-\d{2}$")  # versions and dates: compared as text
_SUFFIX = re.compile(r"^(.*\d)(%|x)$")
_TIMESTAMP = re.compile(r"^(\d{4}-\d{2}-\d{2})T\d")  # an ISO time in a record: its date is what a sentence prints


@dataclass(frozen=True)
class Token:
    text: str  # as printed, without surrounding punctuation
    line: int  # 1-based line of the rendered text

    @property
    def canonical(self) -> str:
        return self.text.replace(",", "").lstrip("+-\u2212")

    @property
    def decimals(self) -> int:
        return len(self.canonical.split(".", 1)[1]) if "." in self.canonical and not _LITERAL.match(self.text) else 0


# ------------------------------------------------------------------------------------------------ tokens
def prose(text: str) -> str:
    """The text a reader sees as prose: code blocks and code spans, image links and link targets, URLs blanked
    (line structure kept, so line numbers still point into the original)."""
    def blank(match: re.Match[str]) -> str:
        return re.sub(r"[^\n]", " ", match.group(0))

    for pattern in (_FENCE, _CODE, _IMAGE, _LINK_TARGET, _URL):
        text = pattern.sub(blank, text)
    return _HEADING_ORDINAL.sub(lambda m: m.group(1) + " " * (len(m.group(0)) - len(m.group(1))), text)


def _word_tokens(word: str) -> Iterator[str]:
    word = word.strip(_STRIP).rstrip(".").strip(_STRIP)
    if not word or not any(ch.isdigit() for ch in word):
        return
    if _LITERAL.match(word):
        yield word
        return
    stamped = _TIMESTAMP.match(word)
    if stamped:
        yield stamped.group(1)
        return
    suffixed = _SUFFIX.match(word)
    if suffixed and _NUMBER.match(suffixed.group(1)):
        yield suffixed.group(1)
        return
    if _NUMBER.match(word):
        yield word
        return
    for sep in ("/", "\u2013", "-", "="):  # 2/3, 1.36-1.90, 48-request, n=4: numbers joined to other words
        if sep in word:
            head, tail = word.split(sep, 1)
            if head and not _NUMBER.match(head.strip(_STRIP)) and any(c.isalpha() for c in head):
                return  # EAGLE-3, Kimi-K2.5, TP0/...: a name that contains digits
            yield from _word_tokens(head)
            yield from _word_tokens(tail)
            return
    # anything else with digits and letters (H200, fp8, INT4, sm_120, 01_crash_repro) is a name, not a number


def numeric_tokens(text: str) -> list[Token]:
    """Every number a reader sees in ``text`` (markdown), outside code, links and heading ordinals."""
    tokens: list[Token] = []
    for number, line in enumerate(prose(text).splitlines(), 1):
        for word in line.split():
            tokens.extend(Token(t, number) for t in _word_tokens(word))
    return tokens


# ------------------------------------------------------------------------------------------------ evidence
def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return value


def _walk(value: Any) -> Iterator[Any]:
    value = _plain(value)
    yield value
    if isinstance(value, dict):
        for item in value.values():
            yield from _walk(item)
    elif isinstance(value, (list, tuple, set, frozenset)):
        for item in value:
            yield from _walk(item)


def _group_counts(items: Sequence[dict[str, Any]]) -> set[int]:
    """How many items share the values of one key, or of two keys (call sites of one kind on one object)."""
    keys = sorted({k for item in items for k, v in item.items() if isinstance(v, (str, bool, int)) or v is None})
    counts: set[int] = set()
    for width in (1, 2):
        for combo in itertools.combinations(keys, width):
            counts.update(Counter(tuple(str(item.get(k)) for k in combo) for item in items).values())
    return counts


@dataclass
class Evidence:
    """What a report may print: formatted numbers, tokens of strings, counts."""

    numbers: list[float]
    string_tokens: set[str]
    counts: set[int]

    @classmethod
    def of(cls, *sources: Any) -> "Evidence":
        numbers: list[float] = []
        strings: set[str] = set()
        counts: set[int] = set()
        for source in sources:
            for value in _walk(source):
                if isinstance(value, bool) or value is None:
                    continue
                if isinstance(value, (int, float)):
                    if value == value and abs(value) != float("inf"):
                        numbers.append(float(value))
                elif isinstance(value, str):
                    for word in value.split():
                        strings.update(Token(t, 0).canonical for t in _word_tokens(word))
                elif isinstance(value, dict):
                    for key in value:  # keys are data too ("at_48_requests")
                        strings.update(Token(t, 0).canonical for t in _word_tokens(str(key)))
                elif isinstance(value, (list, tuple)):
                    counts.add(len(value))
                    items = [_plain(v) for v in value]
                    if items and all(isinstance(v, dict) for v in items):
                        counts.update(_group_counts(items))
        return cls(numbers, strings, counts)

    def holds(self, token: Token) -> bool:
        text = token.canonical
        if text in self.string_tokens:
            return True
        if _LITERAL.match(token.text):
            return False
        value, decimals = float(text), token.decimals
        if decimals:
            return any(f"{abs(v):.{decimals}f}" == text for v in self.numbers)
        whole = int(value)
        if whole in self.counts:
            return True
        return any(abs(v) == whole or (abs(v) >= 100 and round(abs(v)) == whole) for v in self.numbers)


def structural_numbers(notebooks: Iterable[str]) -> set[str]:
    """Numbers the document's structure uses: the notebooks' own numbers (``01_crash_repro`` -> ``01``)."""
    return {name.split("_", 1)[0] for name in notebooks}


def unsourced_numbers(text: str, evidence: Evidence, structural: Iterable[str] = ()) -> list[Token]:
    """The numeric tokens of ``text`` that no evidence value, string or count accounts for."""
    allowed = set(structural)
    return [t for t in numeric_tokens(text) if t.text not in allowed and not evidence.holds(t)]


# ------------------------------------------------------------------------------------------------ tags
@dataclass(frozen=True)
class Block:
    """A paragraph, a list item or a table, as lines of the text; a table, or the items of a list, that a paragraph
    introduces (directly after it) carry that paragraph as their caption."""

    kind: str  # paragraph | item | table | heading
    first_line: int
    text: str
    caption: str = ""


def blocks(text: str) -> list[Block]:
    """Split rendered markdown into the blocks a provenance tag can cover."""
    out: list[Block] = []
    lines = prose(text).splitlines()
    i = 0
    last_paragraph = ""

    def introduced() -> str:  # the caption of what follows: the paragraph just before, or the list's caption
        if not out or out[-1].kind == "heading":
            return ""
        return out[-1].text if out[-1].kind == "paragraph" else out[-1].caption if out[-1].kind == "item" else ""

    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        start = i
        if line.startswith("#"):
            out.append(Block("heading", i + 1, line))
            last_paragraph = ""
            i += 1
        elif line.lstrip().startswith("|"):
            while i < len(lines) and lines[i].lstrip().startswith("|"):
                i += 1
            out.append(Block("table", start + 1, "\n".join(lines[start:i]), last_paragraph))
        elif re.match(r"^\s*[-*] ", line):
            i += 1
            while i < len(lines) and lines[i].startswith("  ") and lines[i].strip() and \
                    not re.match(r"^\s*[-*] ", lines[i]):
                i += 1
            out.append(Block("item", start + 1, "\n".join(lines[start:i]), introduced()))
        else:
            while i < len(lines) and lines[i].strip() and not lines[i].startswith(("#", "|")) and \
                    not re.match(r"^\s*[-*] ", lines[i]):
                i += 1
            last_paragraph = "\n".join(lines[start:i])
            out.append(Block("paragraph", start + 1, last_paragraph))
    return out


def untagged_blocks(text: str, structural: Iterable[str] = ()) -> list[Block]:
    """Blocks that show a number but say nowhere where it comes from. A table may carry its tag in its header,
    in each row, or in the paragraph that introduces it; a list item in itself or in the paragraph that introduces
    its list."""
    allowed = set(structural)
    out = []
    for block in blocks(text):
        if block.kind == "heading":
            continue
        if not [t for t in numeric_tokens(block.text) if t.text not in allowed]:
            continue
        if _TAG.search(block.text):
            if block.kind != "table":
                continue
            rows = block.text.splitlines()
            header_tagged = bool(_TAG.search(rows[0]))
            if header_tagged or all(_TAG.search(r) for r in rows[2:] if numeric_tokens(r)):
                continue
        if block.kind in ("table", "item") and _TAG.search(block.caption):
            continue
        out.append(block)
    return out


# ------------------------------------------------------------------------------------------------ bindings
# Matching a number against *any* evidence value is a weak oracle: 2.94 passes if anything anywhere is 2.94. A
# binding is the strong one: each placeholder of a sentence names the evidence key it was rendered from (and the
# format), each verdict names the rule and the keys it was computed from; the check re-reads every key from the
# evidence and re-renders, so a sentence whose evidence changed, or a verdict its evidence no longer gives, fails
# by name.
def lookup(tree: Any, key: str) -> Any:
    """The value at a dotted key (``model.incident.sensitivity.3.break_even_at_peak``) of the evidence tree."""
    node = tree
    for part in key.split("."):
        node = _plain(node)
        if isinstance(node, (list, tuple)):
            node = node[int(part)]
        elif isinstance(node, dict):
            node = node[part]
        else:
            node = getattr(node, part)
    return _plain(node)


#: A verdict rule: evidence values in, the words a sentence says out (None where there is nothing to say, e.g. no
#: speedup measured; a sentence bound to such a rule does not follow from its evidence).
Rule = Callable[..., Optional[str]]


@dataclass(frozen=True)
class Binding:
    """One placeholder: the evidence keys it reads, how it is rendered (a format spec, or a named rule), the text."""

    keys: tuple[str, ...]
    how: str  # "fmt:<spec>" or "rule:<name>"
    text: str


@dataclass(frozen=True)
class BoundSentence:
    id: str
    text: str
    bindings: tuple[Binding, ...]


class Binder:
    """Renders placeholders from named evidence keys and records them per sentence (``sentence``)."""

    def __init__(self, tree: Any, rules: Optional[dict[str, Rule]] = None):
        self.tree = tree
        self.rules: dict[str, Rule] = dict(rules or {})
        self.pending: list[Binding] = []
        self.sentences: list[BoundSentence] = []

    def num(self, key: str, spec: str) -> str:
        text = format(lookup(self.tree, key), spec)
        self.pending.append(Binding((key,), f"fmt:{spec}", text))
        return text

    def rule(self, name: str, fn: Callable[..., str], *keys: str) -> str:
        self.rules[name] = fn
        text = fn(*(lookup(self.tree, k) for k in keys))
        self.pending.append(Binding(tuple(keys), f"rule:{name}", text))
        return text

    def sentence(self, sentence_id: str, text: str) -> str:
        self.sentences.append(BoundSentence(sentence_id, text, tuple(self.pending)))
        self.pending = []
        return text


def rerender(binding: Binding, tree: Any, rules: dict[str, Rule]) -> Optional[str]:
    kind, _, how = binding.how.partition(":")
    values = [lookup(tree, k) for k in binding.keys]
    return format(values[0], how) if kind == "fmt" else rules[how](*values)


def broken_sentences(text: str, sentences: Sequence[BoundSentence], tree: Any,
                     rules: dict[str, Rule]) -> list[str]:
    """Ids of the bound sentences the rendered ``text`` does not carry, or whose placeholders the evidence ``tree``
    no longer renders to what they say (a key gone counts as broken)."""
    broken = []
    for sentence in sentences:
        ok = sentence.text in text
        for binding in sentence.bindings:
            try:
                ok = ok and binding.text in sentence.text and rerender(binding, tree, rules) == binding.text
            except (KeyError, IndexError, AttributeError, TypeError, ValueError):
                ok = False
        if not ok:
            broken.append(sentence.id)
    return broken
