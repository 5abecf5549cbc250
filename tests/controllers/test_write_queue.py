"""The write queue: one entry per object, ranked lanes with their own slots, the best rank first."""

from __future__ import annotations

import asyncio

import pytest

from pykueue.errors import Conflict
from pykueue.reconcilers.write_queue import WriteQueue
from pykueue.store import base


class Recorder:
    """A send that records the order of names and holds each write until released."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.release: dict[str, asyncio.Event] = {}

    async def send(self, name: str) -> int:
        self.sent.append(name)
        gate = self.release.setdefault(name, asyncio.Event())
        await gate.wait()
        return 1

    def open(self, *names: str) -> None:
        for name in names:
            self.release.setdefault(name, asyncio.Event()).set()


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_a_free_slot_takes_the_best_ranked_name_and_a_lane_waits_for_the_backlog_before_it() -> None:
    async def scenario() -> list[str]:
        rec = Recorder()
        queue = WriteQueue({0: 1, 1: 1}, rec.send)
        queue.offer("first", 0, (0,))  # takes the only urgent slot at once
        queue.offer("low", 0, (-50,))
        queue.offer("high", 0, (-200,))
        queue.offer("words", 1, (0,))
        await _settle()
        assert rec.sent == ["first"]  # a free slot in lane 1, but lane 0 has a backlog
        assert queue.waiting() == {0: 3, 1: 1}
        rec.open("first")
        await _settle()
        assert rec.sent == ["first", "high"]  # the best rank first; "low" still waits
        rec.open("high")
        await _settle()
        assert rec.sent == ["first", "high", "low", "words"]  # no backlog before lane 1 now
        rec.open("low", "words")
        await queue.drain()
        assert queue.written == 4 and len(queue) == 0 and queue.waiting() == {0: 0, 1: 0}
        return rec.sent

    assert asyncio.run(scenario()) == ["first", "high", "low", "words"]


def test_a_lane_writes_beside_an_earlier_lane_that_has_no_backlog() -> None:
    async def scenario() -> list[str]:
        rec = Recorder()
        queue = WriteQueue({0: 1, 1: 1}, rec.send)
        queue.offer("admitting", 0, (0,))
        queue.offer("words", 1, (0,))
        await _settle()
        assert rec.sent == ["admitting", "words"]  # lane 0 is busy but has nothing queued
        rec.open("admitting", "words")
        await queue.drain()
        return rec.sent

    assert asyncio.run(scenario()) == ["admitting", "words"]


def test_a_waiting_name_moves_to_the_place_of_its_latest_offer_and_is_written_once() -> None:
    async def scenario() -> list[str]:
        rec = Recorder()
        queue = WriteQueue({0: 1, 1: 1}, rec.send)
        queue.offer("admitting", 0, (0,))
        queue.offer("busy-words", 1, (0,))
        queue.offer("explained", 1, (0,))  # waits behind busy-words
        queue.offer("explained", 0, (-10,))  # admitted meanwhile: next in the urgent lane
        queue.offer("bounced", 0, (-5,))  # admitted, then preempted before its turn:
        queue.offer("bounced", 1, (0,))  # back to the explanations' lane
        await _settle()
        assert rec.sent == ["admitting", "busy-words"]
        rec.open("admitting")
        await _settle()
        assert rec.sent == ["admitting", "busy-words", "explained"]  # busy-words still travels
        rec.open("explained")
        await _settle()
        assert rec.sent == ["admitting", "busy-words", "explained"]  # bounced waits for lane 1
        rec.open("busy-words", "bounced")
        await queue.drain()
        assert queue.written == 4
        return rec.sent

    assert asyncio.run(scenario()) == ["admitting", "busy-words", "explained", "bounced"]


def test_a_name_offered_while_it_is_written_is_written_again_after() -> None:
    async def scenario() -> list[str]:
        rec = Recorder()
        queue = WriteQueue({0: 2}, rec.send)
        queue.offer("a", 0, (0,))
        await _settle()
        queue.offer("a", 0, (0,))  # changed while its write travels
        queue.offer("b", 0, (0,))
        await _settle()
        assert rec.sent == ["a", "b"]  # never two writes of one name at once
        rec.open("a", "b")
        await queue.drain()
        assert queue.written == 3
        return rec.sent

    assert asyncio.run(scenario()) == ["a", "b", "a"]


def test_failures_are_kept_for_the_caller_and_stop_forgets_the_queue() -> None:
    async def scenario() -> None:
        calls: list[str] = []

        async def send(name: str) -> int:
            calls.append(name)
            if name == "bad":
                raise Conflict("Workload x: conflict")
            await asyncio.sleep(3600)
            return 1

        queue = WriteQueue({0: 1, 1: 1}, send)
        queue.offer("bad", 1, (0,))
        queue.offer("slow", 0, (0,))
        queue.offer("never", 0, (1,))
        await _settle()
        errors = queue.take_errors()
        assert [type(e) for e in errors] == [Conflict] and queue.take_errors() == []
        await queue.stop()
        assert len(queue) == 0 and calls == ["bad", "slow"]

    asyncio.run(scenario())


@pytest.mark.parametrize("slots", [1, 3])
def test_never_more_writes_at_once_than_slots(slots: int) -> None:
    async def scenario() -> int:
        in_flight = most = 0

        async def send(name: str) -> int:
            nonlocal in_flight, most
            in_flight += 1
            most = max(most, in_flight)
            await asyncio.sleep(0.001)
            in_flight -= 1
            return 1

        queue = WriteQueue({0: slots}, send)
        for i in range(20):
            queue.offer(f"w{i}", 0, (i % 3,))
        await queue.drain()
        assert queue.written == 20
        return most

    assert asyncio.run(scenario()) == slots


def test_the_counts_per_lane_follow_every_move() -> None:
    """Names offered, moved between lanes, re-offered while sending, sent and dropped: the
    counts kept per lane always equal a recount of what is queued or being written."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    step = st.tuples(
        st.sampled_from(["offer", "open", "stop"]), st.integers(0, 5), st.integers(0, 1), st.integers(0, 2)
    )

    @settings(max_examples=60, deadline=None)
    @given(st.lists(step, max_size=40))
    def check(steps: list[tuple[str, int, int, int]]) -> None:
        async def scenario() -> None:
            rec = Recorder()
            queue = WriteQueue({0: 1, 1: 2}, rec.send)
            for action, name, lane, rank in steps:
                if action == "offer":
                    queue.offer(f"n{name}", lane, (rank,))
                elif action == "open":
                    rec.open(f"n{name}")
                    rec.release.pop(f"n{name}", None)  # its next write waits again
                else:
                    await queue.stop()
                await _settle()
                recount = dict.fromkeys((0, 1), 0)
                for entry in [*queue._queued.values(), *queue._sending.values()]:
                    recount[entry[0]] += 1
                assert queue.waiting() == recount
            for gate in rec.release.values():
                gate.set()
            await queue.stop()

        asyncio.run(scenario())

    check()


def test_the_writes_of_a_spare_lane_are_made_as_spare_only_requests() -> None:
    async def scenario() -> dict[str, bool]:
        seen: dict[str, bool] = {}

        async def send(name: str) -> int:
            seen[name] = base.request_spare_only.get()  # what the store's rate limit reads
            return 1

        queue = WriteQueue({0: 1, 1: 1}, send, spare_lanes=frozenset({1}))
        queue.offer("admission", 0, (0,))
        queue.offer("explanation", 1, (0,))
        await queue.drain()
        return seen

    assert asyncio.run(scenario()) == {"admission": False, "explanation": True}


class SpareRecorder(Recorder):
    """A Recorder that also notes whether each write was made as a spare-only request."""

    def __init__(self) -> None:
        super().__init__()
        self.spare: list[bool] = []
        self.cancelled: list[str] = []

    async def send(self, name: str) -> int:
        self.spare.append(base.request_spare_only.get())
        try:
            return await super().send(name)
        except asyncio.CancelledError:
            self.cancelled.append(name)
            raise


async def _explaining(name: str) -> tuple[SpareRecorder, WriteQueue]:
    """A queue with one admission slot and one spare explanation slot, ``name``'s
    explanation under way (waiting, as if for a spare token)."""
    rec = SpareRecorder()
    queue = WriteQueue({0: 1, 1: 1}, rec.send, spare_lanes=frozenset({1}))
    queue.offer(name, 1, (0,))
    await _settle()
    return rec, queue


def test_an_admission_cancels_the_explanation_of_the_same_workload_still_waiting() -> None:
    # Under a rate limit that admissions keep busy, an explanation's write may wait minutes
    # for a spare token; the admission of the same workload must not wait behind it.
    async def scenario() -> None:
        rec, queue = await _explaining("w")
        assert rec.sent == ["w"] and rec.spare == [True]
        queue.offer("w", 0, (-100,))
        await _settle()
        assert rec.cancelled == ["w"]
        assert rec.sent == ["w", "w"] and rec.spare == [True, False]  # again, as an admission
        assert queue.waiting() == {0: 1, 1: 0}
        rec.open("w")
        await queue.drain()
        assert queue.written == 1 and len(queue) == 0

    asyncio.run(scenario())


def test_an_admission_offered_before_the_explanation_began_replaces_it() -> None:
    async def scenario() -> None:
        rec = SpareRecorder()
        rec.open("w")
        queue = WriteQueue({0: 1, 1: 1}, rec.send, spare_lanes=frozenset({1}))
        queue.offer("w", 1, (0,))  # its write is started, not yet running
        queue.offer("w", 0, (-100,))
        await queue.drain()
        assert rec.sent == ["w"] and rec.spare == [False] and rec.cancelled == []
        assert queue.written == 1 and queue.waiting() == {0: 0, 1: 0}

    asyncio.run(scenario())


def test_a_newer_explanation_does_not_cancel_the_one_under_way() -> None:
    async def scenario() -> None:
        rec, queue = await _explaining("w")
        queue.offer("w", 1, (-5,))  # new words: one more write after this one
        await _settle()
        assert rec.cancelled == [] and rec.sent == ["w"]
        rec.open("w")
        await queue.drain()
        assert rec.sent == ["w", "w"] and queue.written == 2

    asyncio.run(scenario())


class Travelling(Recorder):
    """A Recorder whose writes first wait for a token (released by ``token``), then say they
    are on their way as the store does, then wait for their answer (``open``)."""

    def __init__(self) -> None:
        super().__init__()
        self.tokens: dict[str, asyncio.Event] = {}

    async def send(self, name: str) -> int:
        await self.tokens.setdefault(name, asyncio.Event()).wait()
        on_its_way = base.request_on_its_way.get()
        assert on_its_way is not None
        on_its_way()
        on_its_way()  # a retry of the same write counts once
        return await super().send(name)

    def token(self, *names: str) -> None:
        for name in names:
            self.tokens.setdefault(name, asyncio.Event()).set()


def test_ahead_counts_what_waits_for_the_rate_limit_not_what_travels() -> None:
    # The admission controller decides no further ahead of its writes than `ahead(0)`: a
    # write already sent is on its way however slowly the API server answers.
    async def scenario() -> None:
        rec = Travelling()
        queue = WriteQueue({0: 2, 1: 1}, rec.send)
        for name in ("a", "b", "c"):
            queue.offer(name, 0, (0,))
        queue.offer("words", 1, (0,))
        await _settle()
        assert queue.ahead(0) == 3 and queue.ahead(1) == 1  # two wait for tokens, one queued
        rec.token("a")
        await _settle()
        assert queue.ahead(0) == 2 and queue.waiting()[0] == 3  # "a" travels
        rec.token("b", "c")
        rec.open("a")
        await _settle()
        assert queue.ahead(0) == 0 and queue.waiting()[0] == 2  # "c" took a's slot and its token
        rec.token("words")
        rec.open("b", "c", "words")
        await queue.drain()
        assert queue.ahead(0) == 0 and queue.ahead(1) == 0 and queue.written == 4

    asyncio.run(scenario())


def test_a_write_cancelled_while_it_travels_leaves_no_count_behind() -> None:
    async def scenario() -> None:
        rec = Travelling()
        queue = WriteQueue({0: 1, 1: 1}, rec.send, spare_lanes=frozenset({1}))
        queue.offer("w", 1, (0,))
        rec.token("w")
        await _settle()
        assert queue.ahead(1) == 0  # the explanation travels
        queue.offer("w", 0, (-100,))  # admitted: the explanation is cancelled, then again
        await _settle()
        assert queue.ahead(1) == 0 and queue.ahead(0) == 0 and queue.waiting() == {0: 1, 1: 0}
        rec.open("w")
        await queue.drain()
        assert queue.waiting() == {0: 0, 1: 0} and queue.ahead(0) == 0

    asyncio.run(scenario())
