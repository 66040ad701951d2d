"""A real headless browser for the report page: Debian's `chromium`, driven through its DevTools protocol
(websocket-client). Records console messages, uncaught exceptions and every network request of the page."""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

CHROMIUM = ("chromium", "chromium-browser", "google-chrome")


def find_chromium() -> str | None:
    return next((p for p in map(shutil.which, CHROMIUM) if p), None)


class Browser:
    """One headless chromium with one page; `events` holds what the page reported (console, exceptions,
    requests)."""

    def __init__(self, width: int = 1400, height: int = 1000, timeout: float = 60):
        import websocket

        exe = find_chromium()
        if exe is None:
            raise RuntimeError("chromium not found")
        self.profile = tempfile.mkdtemp(prefix="mlft-chromium-")
        self.proc = subprocess.Popen(
            [
                exe,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--remote-debugging-port=0",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-default-apps",
                "--disable-extensions",
                "--mute-audio",
                f"--user-data-dir={self.profile}",
                f"--window-size={width},{height}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        url, deadline, seen = None, time.time() + timeout, []
        while time.time() < deadline and url is None:
            line = self.proc.stderr.readline()
            if not line and self.proc.poll() is not None:
                break
            seen.append(line)
            m = re.search(r"DevTools listening on (ws://\S+)", line)
            if m:
                url = m.group(1)
        if url is None:
            self.close()
            raise RuntimeError("chromium did not start: " + "".join(seen[-20:]))
        self.ws = websocket.create_connection(url, timeout=timeout, max_size=None)
        self.timeout = timeout
        self._id = 0
        self.events: list[dict] = []
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Network", "Log"):
            self.call(f"{domain}.enable", session=True)
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session=True,
        )

    def call(self, method: str, params: dict | None = None, session: bool = False) -> dict:
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = self.session
        self.ws.send(json.dumps(msg))
        deadline = time.time() + self.timeout
        while time.time() < deadline:
            reply = json.loads(self.ws.recv())
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            if "method" in reply:
                self.events.append(reply)
        raise TimeoutError(method)

    def open(self, path: Path) -> float:
        """Navigate to the file and wait until the page says it is ready; returns the seconds it took (navigation
        to the first replies shown)."""
        self.events.clear()
        t0 = time.perf_counter()
        self.call("Page.navigate", {"url": Path(path).resolve().as_uri()}, session=True)
        self.eval(
            "window.mlftPage ? window.mlftPage.ready.then(() => 1) : Promise.reject('no mlftPage')",
            until=lambda v: v == 1,
        )
        return time.perf_counter() - t0

    def eval(self, expr: str, until=None):
        """Evaluate `expr` in the page (promises awaited); with `until`, retry until it holds (page loading)."""
        deadline = time.time() + self.timeout
        while True:
            res = self.call(
                "Runtime.evaluate", {"expression": expr, "awaitPromise": True, "returnByValue": True}, session=True
            )
            value = res.get("result", {}).get("value")
            if "exceptionDetails" not in res and (until is None or until(value)):
                return value
            if time.time() > deadline:
                raise AssertionError(f"{expr!r}: {res.get('exceptionDetails') or value}")
            time.sleep(0.1)

    def problems(self) -> list[str]:
        """Console errors/warnings and uncaught exceptions the page reported."""
        out = []
        for e in self.events:
            m, p = e["method"], e.get("params", {})
            if m == "Runtime.exceptionThrown":
                out.append("exception: " + json.dumps(p.get("exceptionDetails", {}))[:500])
            elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "warning", "assert"):
                out.append(f"console.{p['type']}: " + json.dumps(p.get("args"))[:500])
            elif m == "Log.entryAdded" and p.get("entry", {}).get("level") in ("error", "warning"):
                out.append("log: " + p["entry"].get("text", "")[:500])
        return out

    def requests(self) -> list[str]:
        return [e["params"]["request"]["url"] for e in self.events if e["method"] == "Network.requestWillBeSent"]

    def screenshot(self, path: Path, selector: str | None = None, max_height: int = 1400) -> Path:
        """PNG of the element (`selector`, scrolled into view) or of the viewport."""
        params: dict = {"format": "png"}
        if selector:
            box = self.eval(
                f"(() => {{ const e = document.querySelector({json.dumps(selector)}); "
                "e.scrollIntoView(); const r = e.getBoundingClientRect(); "
                "return [r.x + scrollX, r.y + scrollY, r.width, r.height]; })()"
            )
            params.update(
                captureBeyondViewport=True,
                clip={"x": box[0], "y": box[1], "width": box[2], "height": min(box[3], max_height), "scale": 1},
            )
        data = self.call("Page.captureScreenshot", params, session=True)["data"]
        Path(path).write_bytes(base64.b64decode(data))
        return Path(path)

    def close(self) -> None:
        try:
            if getattr(self, "ws", None):
                self.ws.close()
        finally:
            if self.proc.poll() is None:
                self.proc.terminate()
                try:
                    self.proc.wait(10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
            shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
