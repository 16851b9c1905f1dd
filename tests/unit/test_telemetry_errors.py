"""Chainlit's and the socket's errors, and unhandled exceptions, reach --log-file (issue 16 item 7)."""
import asyncio
import logging

import pytest

from app.telemetry import ErrorLogMiddleware, setup_logging


def test_library_errors_go_to_the_file_and_still_to_the_terminal(tmp_path, capsys):
    log_file = tmp_path / "llm.log"
    for _ in range(2):  # set up twice, as a restart in the same process would: no lost or doubled lines
        setup_logging(log_file, env={"VLLM_CONFIGURE_LOGGING": "0"})
    logging.getLogger("chainlit").error("Translation file for xx not found")
    logging.getLogger("engineio.server").error("message async handler error")
    text = log_file.read_text()
    assert text.count("ERROR chainlit: Translation file for xx not found") == 1
    assert "ERROR engineio.server: message async handler error" in text
    assert capsys.readouterr().err.count("Translation file for xx not found") == 1


def test_unhandled_exception_is_logged_with_its_request_and_raised(tmp_path):
    log_file = tmp_path / "llm.log"
    setup_logging(log_file, env={"VLLM_CONFIGURE_LOGGING": "0"})

    async def broken(scope, receive, send):
        raise KeyError("createdAt")

    with pytest.raises(KeyError):
        asyncio.run(ErrorLogMiddleware(broken)({"type": "http", "method": "PUT", "path": "/project/element"},
                                               None, None))
    text = log_file.read_text()
    assert "unhandled error in http PUT /project/element" in text and "KeyError: 'createdAt'" in text
