"""The links' control token: the user's own first, else the file a running `pdd-emu up` mesh made."""

from __future__ import annotations

import pytest

from services.credentials import LINK_TOKEN_ENV, LINK_TOKEN_FILE, LINK_TOKEN_FILE_ENV, MissingToken, link_token


def test_a_run_dir_token_is_found_when_the_environment_names_none(tmp_path):
    (tmp_path / LINK_TOKEN_FILE).write_text("from-the-run-dir\n")
    assert link_token({}, run_dir=tmp_path) == "from-the-run-dir"
    assert link_token({}, run_dir=tmp_path / "absent") is None
    assert link_token({}) is None  # no run dir: links on loopback without a token


def test_a_user_set_token_keeps_priority_over_the_run_dir(tmp_path):
    (tmp_path / LINK_TOKEN_FILE).write_text("from-the-run-dir")
    assert link_token({LINK_TOKEN_ENV: "users-own"}, run_dir=tmp_path) == "users-own"
    (tmp_path / "mine").write_text("users-file")
    assert link_token({LINK_TOKEN_FILE_ENV: str(tmp_path / "mine")}, run_dir=tmp_path) == "users-file"


def test_an_empty_token_file_is_an_error_not_no_token(tmp_path):
    (tmp_path / LINK_TOKEN_FILE).write_text("")
    with pytest.raises(MissingToken, match="empty"):
        link_token({}, run_dir=tmp_path)
