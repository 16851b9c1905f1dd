"""nginx with HTTPS in front of `python launch.py --root-path /chat`: the config in deploy/, tested for real."""
import re
import shutil
import ssl
import subprocess
import time
import urllib.request

import pytest

from tests.support.app_process import ROOT, LaunchedApp, free_port
from tests.support.page import CHROMIUM_ARGS, attach

pytestmark = [pytest.mark.timeout(600)]


def https_get(url):
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    try:
        with urllib.request.urlopen(url, timeout=5, context=context) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


@pytest.fixture
def nginx_in_front(tmp_path):
    if not shutil.which("nginx"):
        pytest.fail("nginx is not installed: apt-get install nginx (.ci/run does)")
    def start(app_port):
        port = free_port()
        subprocess.run(["openssl", "req", "-x509", "-nodes", "-newkey", "rsa:2048", "-days", "1", "-subj",
                        "/CN=localhost", "-keyout", str(tmp_path / "key.pem"), "-out", str(tmp_path / "cert.pem")],
                       check=True, capture_output=True)
        site = (ROOT / "deploy/nginx-ernie-chat.conf").read_text()
        site = (site.replace("listen 443 ssl;", f"listen 127.0.0.1:{port} ssl;")
                .replace("/etc/ssl/certs/chat.example.com.pem", str(tmp_path / "cert.pem"))
                .replace("/etc/ssl/private/chat.example.com.key", str(tmp_path / "key.pem"))
                .replace("127.0.0.1:8000", f"127.0.0.1:{app_port}"))
        (tmp_path / "logs").mkdir()
        conf = tmp_path / "nginx.conf"
        conf.write_text(f"""daemon off; pid {tmp_path}/nginx.pid; error_log {tmp_path}/logs/error.log;
events {{}}
http {{ access_log {tmp_path}/logs/access.log; client_body_temp_path {tmp_path}; proxy_temp_path {tmp_path};
  fastcgi_temp_path {tmp_path}; uwsgi_temp_path {tmp_path}; scgi_temp_path {tmp_path};
  map $http_upgrade $connection_upgrade {{ default upgrade; '' close; }}
{site} }}""")
        proc = subprocess.Popen(["nginx", "-c", str(conf), "-p", str(tmp_path)])
        time.sleep(1)
        procs.append(proc)
        return f"https://127.0.0.1:{port}"
    procs = []
    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(10)


def test_ui_and_routes_under_chat_behind_https_nginx(tiny_model_dir, tmp_path, nginx_in_front):
    from playwright.sync_api import sync_playwright

    app = LaunchedApp(tiny_model_dir, tmp_path, "--root-path", "/chat", "--forwarded-allow-ips", "127.0.0.1")
    try:
        app.wait_http()
        app.wait_ready()
        base = nginx_in_front(app.port) + "/chat"
        code, body = https_get(base + "/readyz")
        assert code == 200 and '"ready":true' in body
        assert https_get(base + "/healthz")[0] == 200
        assert "vllm:" in https_get(base + "/metrics")[1]
        check = app.check()
        assert check.returncode == 0, check.stdout
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium",
                                        args=CHROMIUM_ARGS + ["--ignore-certificate-errors"])
            page = browser.new_page()
            page.goto(base + "/")
            page.wait_for_selector("#chat-input", timeout=30000)
            page.locator("#side-view-content").get_by_text("ready").wait_for(timeout=30000)
            page.fill("#chat-input", "hello through nginx")
            page.click("#chat-submit")
            page.get_by_text(re.compile(r"answer \d+ tokens")).wait_for(timeout=60000)
            # A 5 MB document through nginx (its default body limit is 1 MB): the app reads it.
            big = tmp_path / "big-notes.txt"
            big.write_text("All quiet on the harbour front.\n" * 160_000)
            attach(page, big)
            page.fill("#chat-input", "what is in the notes?")
            page.click("#chat-submit")
            page.get_by_text(re.compile(r"big-notes\.txt is [\d,]+ tokens, more than")).wait_for(timeout=120000)
            browser.close()
    finally:
        app.stop()
        app.kill()
