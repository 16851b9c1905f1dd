"""The words a user's search listed each chat for (app/history/recent_searches.py): per user and chat, taken once,
for a short while, the oldest dropped past the bound."""
from __future__ import annotations

from app.history.recent_searches import RecentSearches


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_last_search_listing_a_chat_is_what_it_opens_with_once_and_for_that_user_only():
    searched = RecentSearches(clock=Clock())
    searched.listed("alice", ["b"], ["c1", "c2"])
    searched.listed("alice", ["brest"], ["c1"])  # typed on: the longer word listed c1 last
    assert searched.take("bob", "c1") == ()
    assert searched.take("alice", "c1") == ("brest",)
    assert searched.take("alice", "c1") == ()  # taken: a later opening of the chat is a plain one
    assert searched.take("alice", "c2") == ("b",)


def test_words_are_kept_briefly_and_bounded():
    clock = Clock()
    searched = RecentSearches(kept_s=600, most=3, clock=clock)
    searched.listed("alice", ["old"], ["c1"])
    clock.now = 601
    assert searched.take("alice", "c1") == ()
    searched.listed("alice", ["w"], ["c1", "c2", "c3", "c4"])
    assert len(searched._words) == 3 and searched.take("alice", "c1") == ()  # the oldest went first
    assert searched.take("alice", "c4") == ("w",)
