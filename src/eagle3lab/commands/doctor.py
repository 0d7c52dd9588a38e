"""``eagle3lab doctor``: why does EAGLE-3 give no speedup on *my* deployment? (``eagle3lab.doctor``)"""

from __future__ import annotations

from eagle3lab.doctor import add_arguments, run

__all__ = ["add_arguments", "run"]
