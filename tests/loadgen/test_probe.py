"""The measured single request the mesh benchmarks and experiments send, against the test double."""

import aiohttp
import pytest

from loadgen.probe import probe_stream
from loadgen.sse import StreamError
from tests.loadgen.conftest import MODEL, answer_ids

PROMPT = list(range(100, 164))


async def test_a_whole_stream_is_measured(fake_router):
    async with aiohttp.ClientSession() as http:
        result = await probe_stream(http, fake_router.url, MODEL, PROMPT, 12)
    assert result["tokens"] == 12 and result["output_ids"] == answer_ids(PROMPT, 12)
    assert 0 < result["ttft_s"] <= result["e2e_s"]
    assert result["max_gap_s"] >= fake_router.itl_s
    assert result["pdd"]["pipeline"] in ("P-MD", "P-RLD-MD")


@pytest.mark.parametrize(("failure", "code"), [("http", "http_503"), ("sse", "server_error"),
                                                ("truncate", "truncated")])
async def test_every_failure_raises_with_its_kind(fake_router, failure, code):
    fake_router.fail = lambda served: failure
    async with aiohttp.ClientSession() as http:
        with pytest.raises(StreamError) as raised:
            await probe_stream(http, fake_router.url, MODEL, PROMPT, 12)
    assert raised.value.code == code
    if failure == "http":
        assert "no capacity" in str(raised.value)


async def test_a_wrong_model_names_the_status_and_the_message(fake_router):
    async with aiohttp.ClientSession() as http:
        with pytest.raises(StreamError, match="HTTP 404: model 'other' does not exist"):
            await probe_stream(http, fake_router.url, "other", PROMPT, 4)
