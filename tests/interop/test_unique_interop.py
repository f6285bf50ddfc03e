"""Unique jobs' lock key against real Ruby: the digest is Ruby's ``JSON.dump`` through sha256.

A Ruby process sharing the Redis (Sidekiq Enterprise 8, or a script checking a lock) computes
``unique:<base64 sha256 of JSON.dump([class, queue, args])>`` (Enterprise 7.x: the hex sha1);
ours must be the same key for every argument a job may take, including the values where
encoders differ most. Enterprise itself is not here: see docs/unique.md for what was checked.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

from django_wurk.core.features.unique import digest
from tests.interop.conftest import _require

ARGS: list[list[Any]] = [
    [],
    [1, "two", None, True, False],
    [1.5, -0.25, 100, -7, 10**20, 2**64],
    # Floats in exponent form: Python's repr writes 1e+20 where Ruby writes 1.0e+20.
    [
        1e20,
        1e16,
        9999999999999998.0,
        1e-5,
        0.0001,
        2.5e-07,
        -0.0,
        1e100,
        1.5e300,
        5e-324,
        1.7976931348623157e308,
    ],
    ["a/b", "é ü ß", "\u2028\u2029", '\u0001\u001f\t\n\r"\\', "😀", "</script>"],
    [{"k": None, "nested": {"list": [1, [2, [3]]], "": ""}}, ["x", {"y": 1}]],
]

RUBY = r"""
require "json"
require "digest"
JSON.parse(STDIN.read).each do |identity|
  text = JSON.dump(identity)
  puts [Digest::SHA256.base64digest(text), Digest::SHA1.hexdigest(text), Digest::SHA256.hexdigest(text)].join(" ")
end
"""


def test_the_lock_digest_is_what_ruby_computes() -> None:
    # Ruby's json and digest only (both ship with Ruby): no Sidekiq needed for this one.
    _require(None if shutil.which("ruby") else "ruby is not installed (apt-get install ruby)")
    identities = [["SyncAddressJob", "default", args] for args in ARGS]
    identities.append(
        ["ActiveJob::QueueAdapters::SidekiqAdapter::JobWrapper", "mailers", "HelloJob", [1, {"a": 2}]]
    )
    out = subprocess.run(
        ["ruby", "-e", RUBY],
        input=json.dumps(identities),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    ruby = [line.split() for line in out.stdout.splitlines()]
    wrapper, queue, job_class, arguments = identities[-1]
    payloads = [{"class": cls, "queue": queue, "args": args} for cls, queue, args in identities[:-1]]
    payloads.append(
        {"class": wrapper, "queue": queue, "args": [{"job_class": job_class, "arguments": arguments}]}
    )
    ours = [[digest(p, layout) for layout in ("enterprise8", "enterprise7", "sha256hex")] for p in payloads]
    assert ours == ruby
