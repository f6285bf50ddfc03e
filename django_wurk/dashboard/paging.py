"""Paging parameters and page links. Counting and slicing happen in Redis (LLEN/ZCARD + a range)."""

from __future__ import annotations

from dataclasses import dataclass

from django.http import HttpRequest

PAGE_SIZES = (25, 50, 100)


@dataclass
class Pager:
    page: int
    count: int
    total: int = 0

    @property
    def start(self) -> int:
        return (self.page - 1) * self.count

    @property
    def pages(self) -> int:
        return max(-(-self.total // self.count), 1)

    @property
    def first_shown(self) -> int:
        return min(self.start + 1, self.total)

    @property
    def last_shown(self) -> int:
        return min(self.start + self.count, self.total)

    @property
    def links(self) -> list[int | None]:
        """Page numbers to link, ``None`` for a gap: 1 … 4 5 [6] 7 8 … 4000."""
        wanted = {1, self.pages, *range(self.page - 2, self.page + 3)}
        shown = sorted(p for p in wanted if 1 <= p <= self.pages)
        out: list[int | None] = []
        for p in shown:
            previous = out[-1] if out else None
            if previous is not None and p - previous > 1:
                out.append(None)
            out.append(p)
        return out


def pager(request: HttpRequest) -> Pager:
    try:
        page = max(int(request.GET.get("page", "1")), 1)
    except ValueError:
        page = 1
    try:
        count = int(request.GET.get("count", str(PAGE_SIZES[0])))
    except ValueError:
        count = PAGE_SIZES[0]
    return Pager(page=min(page, 10_000_000), count=count if count in PAGE_SIZES else PAGE_SIZES[0])
