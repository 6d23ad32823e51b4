"""The tokens `pdd-emu up` makes in its run dir: owner-only files, the links' the user's own when set."""

from __future__ import annotations

import stat

from services.credentials import LINK_TOKEN_ENV, LINK_TOKEN_FILE, LINK_TOKEN_FILE_ENV
from services.launcher.processes import TOKEN_FILE, make_tokens


def test_each_run_gets_new_owner_only_tokens(tmp_path, monkeypatch):
    monkeypatch.delenv(LINK_TOKEN_ENV, raising=False)
    monkeypatch.delenv(LINK_TOKEN_FILE_ENV, raising=False)
    made = []
    for run in range(2):
        make_tokens(tmp_path)
        tokens = [(tmp_path / name).read_text() for name in (TOKEN_FILE, LINK_TOKEN_FILE)]
        for name in (TOKEN_FILE, LINK_TOKEN_FILE):
            assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600, name
        assert all(len(token) == 48 for token in tokens) and tokens[0] != tokens[1]
        made.append(tokens)
    assert made[0][0] != made[1][0] and made[0][1] != made[1][1]


def test_a_user_set_link_token_keeps_priority(tmp_path, monkeypatch):
    monkeypatch.delenv(LINK_TOKEN_FILE_ENV, raising=False)
    monkeypatch.setenv(LINK_TOKEN_ENV, "the-users-own-token")
    make_tokens(tmp_path)
    assert (tmp_path / LINK_TOKEN_FILE).read_text() == "the-users-own-token"
    assert stat.S_IMODE((tmp_path / LINK_TOKEN_FILE).stat().st_mode) == 0o600
