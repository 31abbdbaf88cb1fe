"""The connection rules every command that connects follows (plbjax.sf.live.rest.check_endpoint)."""

from __future__ import annotations

import re
import subprocess

import pytest

from plbjax.errors import BadInput
from plbjax.sf.live.rest import Client, check_endpoint


@pytest.mark.parametrize(
    "endpoint, insecure, token, allowed",
    [
        ("https://mycluster:19080", False, True, False),
        ("HTTPS://mycluster:19080/", False, False, False),
        ("http://localhost:19080", True, False, False),
        ("http://localhost:19080", True, True, True),
    ],
)
def test_what_may_connect(endpoint, insecure, token, allowed):
    check_endpoint(endpoint, insecure, token, allowed)


@pytest.mark.parametrize(
    "endpoint, insecure, token, allowed, said",
    [
        ("localhost:19080", True, False, False, "localhost:19080 is not an http(s) URL; write the scheme"),
        ("mycluster", True, False, False, "mycluster is not an http(s) URL"),
        ("ftp://mycluster:19080", True, False, False, "is not an http(s) URL"),
        ("http://", True, False, False, "is not an http(s) URL"),
        ("http://localhost:19080", False, False, False, "is not https; add --insecure"),
        ("http://localhost:19080", True, True, False, "the bearer token would be sent in clear text"),
    ],
)
def test_what_is_refused_before_anything_is_sent(endpoint, insecure, token, allowed, said):
    with pytest.raises(BadInput, match=re.escape(said)):
        check_endpoint(endpoint, insecure, token, allowed)
    with pytest.raises(BadInput, match=re.escape(said)):
        Client(endpoint, insecure=insecure, token="t" if token else None, token_over_http=allowed)


def test_plbjax_dump_refuses_a_url_without_a_scheme_at_once(tmp_path):
    command = ["plbjax-dump", "--endpoint", "localhost:19080", "--insecure"]
    done = subprocess.run([*command, "-o", str(tmp_path / "dump")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "is not an http(s) URL" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
