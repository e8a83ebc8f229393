"""The shape of the knowledge: a failure family (cause, fix, public sources) and the message rules that feed it."""

import dataclasses
import re


@dataclasses.dataclass(frozen=True)
class Family:
    id: str
    order: int      # lower = closer to a root cause; findings are listed in this order
    title: str
    cause: str
    fix: str
    sources: tuple  # public issue threads / vendor documents the entry is based on
    # seconds by which the family's first line may trail the fault it reports (a detector that must time out first):
    # an unexplained failure line up to that much earlier is the fault's echo, not an earlier cause
    lag: float = 0.0
    # whether a restart may help (``retry.py``): transient / config / resource / environment / unknown, and why
    retry_class: str = "unknown"
    retry_reason: str = ""


@dataclasses.dataclass(frozen=True)
class Rule:
    family: str
    keywords: tuple  # literal prefilter, any one must occur in the line
    pattern: str     # regex searched in the line once a keyword matched
    any_level: bool = False  # also match WARNING/INFO lines (messages that are only ever printed as warnings)
    unless: str = ""  # regex: a line that also matches it is not this rule's (a source line, a benign shutdown echo)

    def compiled(self):
        return re.compile(self.pattern)

    def rejected(self):
        return re.compile(self.unless) if self.unless else None


GH = "https://github.com/"
HIASCEND = "https://www.hiascend.com/document/detail/"
TORCH_NPU_DOCS = GH + "Ascend/pytorch/blob/master/docs/zh/troubleshooting/"
VERL_NPU_FAQ = GH + "verl-project/verl/blob/main/docs/ascend_tutorial/en/faq/faq.rst"
VLLM_ASCEND_FAQ = GH + "vllm-project/vllm-ascend/blob/main/docs/source/faqs.md"
