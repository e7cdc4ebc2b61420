"""formcast.grammar.structural_tag: structural tags (free text, tags, triggers) -> one CFG."""

from formcast.grammar.structural_tag.compile import (
    compile_structural_tag,
    structural_tag_to_cfg,
)
from formcast.grammar.structural_tag.error import StructuralTagError
from formcast.grammar.structural_tag.format import StructuralTag, parse_structural_tag
from formcast.grammar.structural_tag.free_text import free_text_tree

__all__ = [
    "StructuralTag",
    "StructuralTagError",
    "compile_structural_tag",
    "free_text_tree",
    "parse_structural_tag",
    "structural_tag_to_cfg",
]
