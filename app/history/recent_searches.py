"""The words a user last searched their chats for, kept a short while for each chat the search listed, so that
opening a chat from the search shows the version of an answer (or the branch) that holds them: the page's search
dialog lists chats (the data layer's ``list_threads``) and then opens one by its address alone, with nothing of
the search in it.

Kept in memory only, per user and chat, at most RECENT_SEARCHES pairs (the oldest dropped first) and for
SEARCH_KEPT_S; taken once, by the opening it was for. A search typed word by word lists chats for each prefix: the
last one to list a chat is what it is opened with.
"""
from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterable

# A search is followed by a click within seconds; ten minutes covers reading the list, and no more.
SEARCH_KEPT_S = 600.0
# (user, chat) pairs kept: a search lists 20 chats a page; this is a hundred such pages across every user.
RECENT_SEARCHES = 2_000


class RecentSearches:
    def __init__(self, kept_s: float = SEARCH_KEPT_S, most: int = RECENT_SEARCHES,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.kept_s, self.most, self.clock = kept_s, most, clock
        self._words: OrderedDict[tuple[str, str], tuple[tuple[str, ...], float]] = OrderedDict()

    def listed(self, user_id: str, words: Iterable[str], chat_ids: Iterable[str]) -> None:
        """A search for ``words`` by ``user_id`` listed these chats."""
        kept = (tuple(words), self.clock())
        for chat_id in chat_ids:
            self._words.pop((user_id, chat_id), None)
            self._words[(user_id, chat_id)] = kept
        while len(self._words) > self.most:
            self._words.popitem(last=False)

    def take(self, user_id: str, chat_id: str) -> tuple[str, ...]:
        """The words of the search that listed this chat for this user lately (none when there was none), once."""
        words, at = self._words.pop((user_id, chat_id), ((), 0.0))
        return words if self.clock() - at <= self.kept_s else ()
