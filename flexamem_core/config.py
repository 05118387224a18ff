"""The settings of a memory: a few a user chooses, and the method's hyperparameters apart.

``FlexAMemConfig`` holds what a user decides (the budget, the recovery mode, the kind of
history, whether requests stay prompt-cache stable, when the embedder loads). ``Tuning``
holds the paper's hyperparameters (DESIGN.md section 7) and this project's own constants
(fusion, cache-stable targets), with their defaults; most users never change them.
"""

from __future__ import annotations

import warnings
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .recall.strategies.registry import strategy_class

HistoryKind = Literal["agent", "reader"]


class Tuning(BaseModel):
    """The method's hyperparameters. Defaults are the paper's where it sets one (DESIGN.md
    section 7); docs/evaluation.md says where each other one was chosen."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # The request.
    safety_margin: float = Field(0.95, gt=0, le=1, description="B_bar = margin * B")
    window_share: float = Field(0.25, ge=0, le=1, description="recent window: B * share (agents)")
    # Units and notes.
    agent_unit_tokens: int = Field(1000, gt=0, description="agent steps packed into units of about this size")
    reader_unit_tokens: int = Field(2000, gt=0, description="conversation spans cut at user turns, at most this")
    record_words: int = Field(80, gt=0)
    merged_record_words: int = Field(120, gt=0)
    merged_record_cut_words: int = Field(150, gt=0)
    merge_fanin: int = Field(4, ge=2, description="records merged into one merged record")
    links_per_note: int = Field(3, ge=0)
    piece_tokens: int = Field(150, gt=0, description="kappa: the largest piece")
    # Recovery.
    timeline_share: float = Field(0.25, ge=0, le=1, description="rho: the timeline's share of the memory")
    revealed_share: float = Field(0.3, ge=0, lt=1, description="agents: the share of the memory for the "
                                  "identifiers old steps revealed, on their records' lines (0: none)")
    revealed_tokens: int = Field(400, ge=0, description="agents: the most tokens of such identifiers one render "
                                 "or extension adds, whatever the budget (the few hundred an agent reuses)")
    seeds: int = Field(10, ge=0, description="k: seed units by score")
    link_discount: float = Field(0.9, ge=0, le=1, description="lambda: score of a linked or neighbouring unit")
    excerpt_tokens: int = Field(300, ge=0, description="E: the pieces of an excerpt")
    bm25_k1: float = Field(1.2, ge=0)
    bm25_b: float = Field(0.75, ge=0, le=1)
    query_terms: int | None = Field(25, ge=1, description="BM25: a query text keeps at most this many distinct "
                                    "content words, those with the highest idf (as Lucene's MoreLikeThis bounds "
                                    "a long text with maxQueryTerms); None: all")
    fusion: Literal["rrf", "blend", "bm25"] = Field("rrf", description="how BM25 and cosine rankings of pieces "
                                                    "combine: reciprocal rank fusion, a blend of normalised "
                                                    "scores, or BM25 alone (cosine breaks ties)")
    fusion_k: float = Field(20.0, gt=0, description="rrf: score = sum of weight / (k + rank)")
    fusion_weight: float = Field(0.5, ge=0, le=1, description="weight of the dense ranking in the fusion")
    fused_excerpts: bool = Field(False, description="unit recovery: rank excerpt pieces by the fusion too "
                                 "(default: BM25 matches only)")
    fused_seeds: bool = Field(True, description="unit recovery: seeds by the fusion of the note cosine and each "
                              "unit's best fused piece (False: the note cosine alone, as the paper)")
    # The cache-stable request.
    stable_target: float = Field(0.6, gt=0, le=1, description="a re-render fills at most this share of the "
                                 "budget, so the calls after it can append")
    stable_head: bool = Field(True, description="the first render after the history was sent whole keeps its "
                              "oldest units verbatim after the fixed prompt, where they were sent (a cached "
                              "prefix), while the memory keeps room for a record of every other old unit")
    stable_extend: Literal["evict_all", "to_target"] = Field(
        "evict_all", description="which units an extension moves from the recent window into the memory: every "
        "one but the newest while the memory stays within its cap, or only enough to fit stable_target")

    @model_validator(mode="after")
    def _check(self) -> Tuning:
        if self.merged_record_cut_words < self.merged_record_words:
            raise ValueError("merged_record_cut_words must be >= merged_record_words")
        return self


TUNING_FIELDS = frozenset(Tuning.model_fields)

#: Ablation switches of earlier releases and the evaluation strategy each one names now.
_ABLATIONS = {("recovery", False): "timeline-only", ("excerpts", False): "unit-no-excerpts",
              ("random_candidates", True): "random-candidates"}


class FlexAMemConfig(BaseModel):
    """What a user chooses; the method's hyperparameters are in ``tuning``.

    ``mode`` names the recovery strategy (:mod:`flexamem_core.recall.strategies`): ``auto``
    (the default: per call, a fixed rule splits the memory between the trace, whole units and
    pieces), ``unit`` (the paper's agent mode) or ``piece`` (the paper's mode for questions
    over a history), or any registered strategy. ``history`` picks how messages become units:
    ``agent`` steps packed into units, or ``reader`` spans cut at user turns.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    budget: int = Field(8000, gt=0, description="B: the model's context budget in tokens")
    mode: str = Field("auto", description="the recovery strategy, by its registered name")
    history: HistoryKind = "agent"
    cache_stable: bool = Field(True, description="agents: keep the request a prompt-cache-stable prefix: append "
                               "new messages to the previous request while it fits, re-render only when it would "
                               "exceed the budget (False: the paper's render on every call)")
    keep_task: bool | None = Field(None, description="keep the first user message (the task) whole ahead of the "
                                   "memory in every request instead of in a unit. None: on for agent histories, "
                                   "off for readers (where the first turn is one turn among many)")
    pin_user_turn: bool = Field(True, description="agents: keep the newest human turn visible even when its unit "
                                "left the window (turn off where user messages are observations)")
    piece_vectors: bool | None = Field(None, description="embed every piece when its unit is written, for the "
                                       "dense half of evidence selection (False: pieces use their unit's vector; "
                                       "cheaper writes). None: on for reader histories, off for agents")
    warm: Literal["lazy", "background"] = Field("lazy", description="when the embedder loads: on first use, or "
                                                "in a background thread as the FlexAMem is created")
    tuning: Tuning = Field(default_factory=Tuning, description="the method's hyperparameters")

    @model_validator(mode="before")
    @classmethod
    def _legacy_names(cls, data: Any) -> Any:
        """Settings of earlier releases keep working for one release, with a DeprecationWarning:
        hyperparameters given at the top level move into ``tuning``; an ablation switch names
        its evaluation strategy as the ``mode``."""
        if not isinstance(data, dict):
            return data
        moved = {k: data[k] for k in data if k in TUNING_FIELDS}
        ablations = [(k, data[k]) for k in ("recovery", "excerpts", "random_candidates") if k in data]
        if not moved and not ablations:
            return data
        data = {k: v for k, v in data.items() if k not in moved and k not in dict(ablations)}
        if moved:
            warnings.warn(f"FlexAMemConfig({', '.join(moved)}=...) is deprecated: pass "
                          f"tuning=Tuning({', '.join(moved)}=...)", DeprecationWarning, stacklevel=4)
            tuning = data.get("tuning") or {}
            tuning = tuning.model_dump(exclude_unset=True) if isinstance(tuning, Tuning) else dict(tuning)
            data["tuning"] = {**moved, **tuning}
        for key, value in ablations:
            if (key, value) in _ABLATIONS:
                warnings.warn(f"FlexAMemConfig({key}={value}) is deprecated: it is the evaluation's strategy "
                              f"mode={_ABLATIONS[key, value]!r}", DeprecationWarning, stacklevel=4)
                data["mode"] = _ABLATIONS[key, value]
        return data

    @field_validator("mode")
    @classmethod
    def _known_mode(cls, mode: str) -> str:
        strategy_class(mode)  # ValueError naming the registered strategies
        return mode

    def __getattr__(self, name: str) -> Any:
        if name in TUNING_FIELDS:
            warnings.warn(f"FlexAMemConfig.{name} is deprecated: read FlexAMemConfig.tuning.{name}",
                          DeprecationWarning, stacklevel=2)
            return getattr(self.tuning, name)
        return super().__getattr__(name)  # type: ignore[misc]

    @property
    def embeds_pieces(self) -> bool:
        """Whether a unit's pieces get their own vectors when it is written (``piece_vectors``)."""
        return self.history == "reader" if self.piece_vectors is None else self.piece_vectors

    @property
    def effective_budget(self) -> int:
        """B_bar, the budget the rendered context must stay within."""
        return int(self.budget * self.tuning.safety_margin)

    @property
    def unit_tokens(self) -> int:
        """The size units of this history kind are packed to."""
        return self.tuning.agent_unit_tokens if self.history == "agent" else self.tuning.reader_unit_tokens

    def updated(self, **settings: Any) -> FlexAMemConfig:
        """A copy with ``settings`` changed, validated (the settings this one was given explicitly kept)."""
        return FlexAMemConfig(**{**self.model_dump(exclude_unset=True), **settings})

    def tuned(self, **hyperparameters: Any) -> FlexAMemConfig:
        """A copy with ``hyperparameters`` of ``tuning`` changed, validated."""
        return self.updated(tuning=Tuning(**{**self.tuning.model_dump(exclude_unset=True), **hyperparameters}))

    def with_budget(self, budget: int) -> FlexAMemConfig:
        """A copy with another budget (validated)."""
        return FlexAMemConfig(**{**self.model_dump(), "budget": budget})
