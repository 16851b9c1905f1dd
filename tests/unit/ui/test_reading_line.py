"""The reading line of a long prompt (issue 35 item 2): when it shows, what it says, and the rate it is built on
(vLLM's prefill histograms, measured from the moment an engine has paid its one-time costs)."""
import asyncio

from prometheus_client import CollectorRegistry, Histogram

from app.engine.prefill_rate import MIN_MEASURED_TOKENS, PREFILL_SECONDS, PREFILL_TOKENS, PrefillRate, registry_sums
from app.ui.reading_line import ReadingLine, reading_text, worth_showing


def engine_histograms(registry, engine: str = "0"):
    """The two series as vLLM's stat logger registers them (one label set per engine)."""
    tokens = Histogram(PREFILL_TOKENS, "computed prompt tokens", ["engine"], registry=registry)
    seconds = Histogram(PREFILL_SECONDS, "prefill time", ["engine"], registry=registry)
    return tokens.labels(engine), seconds.labels(engine)


def test_the_rate_counts_only_what_was_read_after_the_engine_warmed_up():
    registry = CollectorRegistry()
    tokens, seconds = engine_histograms(registry)
    rate = PrefillRate(lambda: registry_sums(registry))
    tokens.observe(4)
    seconds.observe(1.85)  # the first request: one-time costs, nothing like a document's rate
    assert rate.tokens_per_second() is None  # not measuring yet
    rate.start_measuring()
    tokens.observe(MIN_MEASURED_TOKENS - 1)
    seconds.observe(0.5)
    assert rate.tokens_per_second() is None  # too little read to tell
    tokens.observe(7001)
    seconds.observe(27.5)
    assert rate.tokens_per_second() == (MIN_MEASURED_TOKENS - 1 + 7001) / 28.0


def test_without_vllms_series_there_is_no_rate():  # a remote engine keeps its measurements on its own server
    empty = CollectorRegistry()
    rate = PrefillRate(lambda: registry_sums(empty))
    rate.start_measuring()
    assert rate.tokens_per_second() is None


def test_an_engine_that_cannot_be_asked_gives_no_rate():  # the engine process is gone or did not answer in time
    rate = PrefillRate(lambda: None)
    rate.start_measuring()
    assert rate.tokens_per_second() is None


def test_the_line_shows_for_prompts_that_take_a_second_or_more():
    assert worth_showing(7000, 250.0) and not worth_showing(200, 250.0)
    assert worth_showing(2000, None) and not worth_showing(500, None)  # no rate: long prompts only


def test_the_line_counts_down_then_says_it_is_late_in_both_languages():
    assert reading_text("en-US", 7000, 3.2, 250.0) == (
        "`Reading your message: 7,000 tokens · 3 s · about 25 s left (the engine reads ~250 tokens/s)`")
    assert reading_text("en-US", 7000, 30.0, 250.0) == (
        "`Reading your message: 7,000 tokens · 30 s · longer than the 28 s estimated`")
    assert reading_text("en-US", 7000, 4.0, None) == "`Reading your message: 7,000 tokens · 4 s`"
    assert reading_text("zh-CN", 7000, 3.2, 250.0) == (
        "`正在读取你的消息：7,000 个 token · 已用 3 秒 · 预计还需约 25 秒（引擎读取速度约 250 token/秒）`")


def test_the_line_is_shown_from_start_until_stop():
    shown: list[str] = []

    async def show(line: str) -> None:
        shown.append(line)

    async def run() -> tuple[bool, bool]:
        quiet = ReadingLine(show, "en-US", 100, 250.0)
        quiet.start()  # a short prompt: nothing to show
        await asyncio.sleep(0.01)
        line = ReadingLine(show, "en-US", 7000, 250.0)
        line.start()
        await asyncio.sleep(0.01)
        return await quiet.stop(), await line.stop()

    assert asyncio.run(run()) == (False, True)
    assert shown == ["`Reading your message: 7,000 tokens · 0 s · about 28 s left (the engine reads ~250 tokens/s)`"]
