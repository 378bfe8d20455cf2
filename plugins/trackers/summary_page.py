"""The page of a sweep's (or a comparison's) summary: one self-contained HTML file, its plots inside
it, whose run links work where it is opened.

- From the server's own address (`get-artifact`, or any http page): the server's origin.
- In MLflow's artifact preview, a sandboxed frame of a `blob:` page: the origin inside the blob's
  address. That frame may open nothing by a plain click (no popups, no top navigation), but a
  Ctrl+click or a middle-click opens the link in a new tab: the page says so when a plain click is
  made, rather than doing nothing.
- A downloaded copy (`file:`): the address the page was written with (the tracking server, or
  where `python -m framework ui` serves a SQLite store).
"""

from __future__ import annotations

import base64
import html
import urllib.parse
from collections.abc import Sequence
from pathlib import Path

from . import local_views

#: What `ui` serves a SQLite store at by default (plugins/trackers/ui.py DEFAULT_PORT).
UI_ADDRESS = "http://127.0.0.1:5000"

STYLE = (
    "body{font:13px/1.4 system-ui,sans-serif;margin:12px;color:#1f2328}"
    "h1{font-size:17px;margin:0 0 6px}h2{font-size:15px;margin:16px 0 6px}p{margin:0 0 10px;max-width:70em}"
    ".scroll{overflow-x:auto}table{border-collapse:collapse}"
    "th,td{border-bottom:1px solid #d8dee4;padding:4px 8px;text-align:left;vertical-align:top}"
    "th{background:#f6f8fa;position:sticky;top:0;white-space:nowrap}"
    ".n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}"
    "tr.best td{background:#dafbe1;font-weight:600}tr.out td{color:#8c959f}"
    "img{max-width:100%;height:auto;margin:4px 12px 8px 0;vertical-align:top}"
    "#hint{display:none;position:fixed;left:12px;right:12px;top:8px;padding:8px 12px;background:#fff8c5;"
    "border:1px solid #d4a72c;border-radius:6px;z-index:9}small{color:#59636e}"
)

#: Rewrites each run link to the origin the page is seen from; in MLflow's sandboxed preview, says
#: how to open a link instead of letting a plain click do nothing.
SCRIPT = """
(function () {
  var p = location.protocol, base = null;
  if (p === 'http:' || p === 'https:') base = location.origin;
  else if (p === 'blob:') { try { base = new URL(location.href.slice(5)).origin; } catch (e) {} }
  var sandboxed = p === 'blob:';
  var hint = document.getElementById('hint');
  document.querySelectorAll('a[data-run]').forEach(function (a) {
    if (base) a.href = base + '/' + a.getAttribute('data-run');
    a.addEventListener('click', function (e) {
      if (!sandboxed || e.ctrlKey || e.metaKey || e.shiftKey || e.button !== 0) return;
      e.preventDefault();
      hint.textContent = "MLflow's preview blocks a plain click on a link: Ctrl+click (\\u2318+click on "
        + 'a Mac) or middle-click opens this run in a new tab: ' + a.href;
      hint.style.display = 'block';
      clearTimeout(hint.timer);
      hint.timer = setTimeout(function () { hint.style.display = 'none'; }, 9000);
    });
  });
})();
"""


def address_of(uri: str) -> str:
    """Where the runs of this tracking URI are seen: the server itself, else where `ui` serves it."""
    if uri.startswith(("http://", "https://")):
        return uri.rstrip("/")
    if uri.startswith(local_views.SQLITE):
        return local_views.ui_address(local_views.absolute_uri(uri))
    return UI_ADDRESS


def _served_by_ui(address: str) -> bool:
    """Whether `address` is one `ui` takes for a local store (local_views.port_for)."""
    parts = urllib.parse.urlsplit(address)
    return parts.hostname == "127.0.0.1" and 5000 <= (parts.port or 0) <= 5999


def run_link(address: str, fragment: str, text: str) -> str:
    """A link to a run's page (`fragment`: `#/experiments/…/runs/…?workflowType=…`)."""
    href = f"{address.rstrip('/')}/{fragment}" if address else fragment
    return (
        f"<a href='{html.escape(href)}' data-run='{html.escape(fragment)}' target='_blank' "
        f"rel='noopener'>{html.escape(text)}</a>"
    )


def image(path: Path, alt: str) -> str:
    """The plot inside the page (a data address): the page stays one file, wherever it goes."""
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f"<img alt='{html.escape(alt)}' src='data:image/png;base64,{data}'>"


def write(path: Path, *, heading: str, sections: Sequence[str], address: str) -> Path:
    """The page: its heading, the sections (HTML), and where a downloaded copy opens runs."""
    where = (
        f"<p><small>Run links open the runs where this page is seen from; a downloaded copy opens them at "
        f"{html.escape(address)}"
        + (" (python -m framework ui serves the store there)." if _served_by_ui(address) else ".")
        + "</small></p>"
        if address
        else ""
    )
    title = html.escape(heading)
    path.write_text(
        "<!doctype html><meta charset='utf-8'><meta name='viewport' content='width=device-width'>"
        f"<title>{title}</title><style>{STYLE}</style><div id=hint role=status></div>"
        f"<h1>{title}</h1>{''.join(sections)}{where}<script>{SCRIPT}</script>",
        encoding="utf-8",
    )
    return path
