"""One typed, validated config holding every setting of DESIGN.md section 7."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Mode = Literal["unit", "piece", "auto"]
HistoryKind = Literal["agent", "reader"]


class FlexAMemConfig(BaseModel):
    """Settings of the method. Defaults are the paper's (DESIGN.md section 7) but ``mode``.

    ``mode`` picks the recovery: ``auto`` (the default: per call, a fixed rule splits the
    memory between the trace, whole units and pieces, :mod:`flexamem_core.recall.auto`; measured at
    least as good as the better fixed mode on every dev dataset and budget), ``unit`` (the
    paper's agent mode) or ``piece`` (the paper's mode for questions over a history).
    ``history`` picks how messages become units: ``agent`` steps packed to
    ``agent_unit_tokens`` or ``reader`` spans cut at user turns.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    budget: int = Field(8000, gt=0, description="B: the model's context budget in tokens")
    mode: Mode = "auto"
    history: HistoryKind = "agent"
    safety_margin: float = Field(0.95, gt=0, le=1, description="B_bar = margin * B")
    agent_unit_tokens: int = Field(1000, gt=0)
    reader_unit_tokens: int = Field(2000, gt=0)
    window_share: float = Field(0.25, ge=0, le=1, description="recent window: B * share (agents)")
    record_words: int = Field(80, gt=0)
    merged_record_words: int = Field(120, gt=0)
    merged_record_cut_words: int = Field(150, gt=0)
    merge_fanin: int = Field(4, ge=2, description="records merged into one merged record")
    links_per_note: int = Field(3, ge=0)
    piece_tokens: int = Field(150, gt=0, description="kappa")
    seeds: int = Field(10, ge=0, description="k")
    link_discount: float = Field(0.9, ge=0, le=1, description="lambda")
    excerpt_tokens: int = Field(300, ge=0, description="E")
    timeline_share: float = Field(0.25, ge=0, le=1, description="rho")
    bm25_k1: float = Field(1.2, ge=0)
    bm25_b: float = Field(0.75, ge=0, le=1)
    query_terms: int | None = Field(25, ge=1, description="BM25: a query text with more distinct content "
                                    "words keeps only this many, those with the highest idf (a long text "
                                    "as the query, bounded as Lucene's MoreLikeThis bounds it with "
                                    "maxQueryTerms, 25); None: all")
    piece_vectors: bool | None = Field(None, description="embed every piece once when its unit is "
                                        "written (in the unit's batch) for the dense half of evidence "
                                        "selection; False: pieces use their unit's note vector (cheaper "
                                        "writes, lexical-led selection); None (default): on for reader "
                                        "histories (+7 to +11 points of evidence on the conversation dev "
                                        "sets), off for agents (no measurable gain on trajectories)")
    fusion: Literal["rrf", "blend", "bm25"] = Field("rrf", description="how BM25 and cosine rankings of "
                                                    "pieces combine: reciprocal rank fusion, a blend of "
                                                    "normalised scores, or BM25 alone (cosine breaks ties)")
    fusion_k: float = Field(20.0, gt=0, description="rrf: score = sum of weight / (k + rank)")
    fusion_weight: float = Field(0.5, ge=0, le=1, description="weight of the dense ranking in the fusion")
    fused_excerpts: bool = Field(False, description="unit recovery: rank excerpt pieces by the fusion too "
                                 "(default off: measured neutral on conversations and 1.7 points fewer reused "
                                 "details at 8k on trajectories; BM25 matches only)")
    fused_seeds: bool = Field(True, description="unit recovery: seeds by the fusion of the note cosine and "
                              "each unit's best fused piece (False: the note cosine alone, as the paper)")
    excerpts: bool = Field(True, description="ablation switch: False = raw or record only")
    recovery: bool = Field(True, description="ablation switch: False = timeline only")
    random_candidates: bool = Field(False, description="control: every unit a candidate, hashed order")
    warm: Literal["lazy", "background"] = Field("lazy", description="when the embedder loads: on first use, "
                                                "or in a background thread as the FlexAMem is created")
    pin_user_turn: bool = Field(True, description="agents: keep the newest human turn visible even when "
                                "its unit left the window (turn off where user messages are observations)")
    cache_stable: bool = Field(True, description="agents: keep the request a prompt-cache-stable prefix: "
                               "append new messages to the previous request while it fits, re-render only "
                               "when it would exceed the budget (False: the paper's render on every call)")
    stable_target: float = Field(0.6, gt=0, le=1, description="cache_stable: a re-render fills at most this "
                                 "share of the budget, so the calls after it can append")
    stable_head: bool = Field(True, description="cache_stable: the first render after the history was sent whole "
                              "keeps its oldest units verbatim right after the fixed prompt, where they were sent "
                              "(a cached prefix), as long as the memory keeps room for a record of every other "
                              "old unit; the next render drops them")
    stable_extend: Literal["evict_all", "to_target"] = Field(
        "evict_all", description="cache_stable: which units an extension moves from the recent window into "
        "the memory: every one but the newest while the memory stays within its cap ('evict_all': the most "
        "calls append before the next one), or only enough for the request to fit stable_target ('to_target')")

    @model_validator(mode="after")
    def _check(self) -> FlexAMemConfig:
        if self.merged_record_cut_words < self.merged_record_words:
            raise ValueError("merged_record_cut_words must be >= merged_record_words")
        return self

    @property
    def embeds_pieces(self) -> bool:
        """Whether a unit's pieces get their own vectors when it is written (``piece_vectors``)."""
        return self.history == "reader" if self.piece_vectors is None else self.piece_vectors

    @property
    def effective_budget(self) -> int:
        """B_bar, the budget the rendered context must stay within."""
        return int(self.budget * self.safety_margin)

    def updated(self, **settings: object) -> FlexAMemConfig:
        """A copy with ``settings`` changed, validated (the settings this one was given explicitly kept)."""
        return FlexAMemConfig(**{**self.model_dump(exclude_unset=True), **settings})

    def with_budget(self, budget: int) -> FlexAMemConfig:
        """A copy with another budget (validated)."""
        return FlexAMemConfig(**{**self.model_dump(), "budget": budget})
