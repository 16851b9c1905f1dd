"""Draw ernie-chat's logo (light and dark) and favicon into public/, where Chainlit serves an app's own branding.

    .venv/bin/python scripts/draw_brand.py     # writes public/logo_light.png, public/logo_dark.png, public/favicon.png

The pictures are SVG drawn here, rendered to PNG by Chromium (Playwright, as the browser tests run it): the
wordmark's font is baked into the pixels, so the page shows the same logo on every machine. Chainlit's
``/logo?theme=light|dark`` serves ``public/logo_<theme>.*`` and ``/favicon`` serves ``public/favicon.*``
(chainlit/server.py); the welcome screen shows the logo 200 px wide, so it is drawn at nearly 4x that.
"""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PUBLIC = ROOT / "public"
CHROMIUM = "/usr/bin/chromium"

# The mark: a speech bubble on a rounded square, three dots for an answer being written.
MARK = """<defs><linearGradient id="g" x1="0" y1="0" x2="1" y2="1">
  <stop offset="0" stop-color="#2563eb"/><stop offset="1" stop-color="#7c3aed"/></linearGradient></defs>
<rect x="0" y="0" width="200" height="200" rx="44" fill="url(#g)"/>
<path d="M52 52h96a18 18 0 0 1 18 18v52a18 18 0 0 1-18 18H92l-30 26v-26h-10a18 18 0 0 1-18-18V70a18 18 0 0 1 18-18z"
      fill="#ffffff"/>
<circle cx="72" cy="96" r="10" fill="#2563eb"/><circle cx="100" cy="96" r="10" fill="#4f46e5"/>
<circle cx="128" cy="96" r="10" fill="#7c3aed"/>"""
WORD_COLOUR = {"light": "#111827", "dark": "#f3f4f6"}  # on Chainlit's light and dark page backgrounds


def logo_svg(theme: str) -> str:
    return f"""<svg xmlns="http://www.w3.org/2000/svg" width="760" height="200" viewBox="0 0 760 200">{MARK}
<text x="236" y="132" font-family="DejaVu Sans, Noto Sans, sans-serif" font-weight="700" font-size="90"
      letter-spacing="-2" fill="{WORD_COLOUR[theme]}">ernie-chat</text></svg>"""


def favicon_svg() -> str:
    return f'<svg xmlns="http://www.w3.org/2000/svg" width="200" height="200" viewBox="0 0 200 200">{MARK}</svg>'


def render(svg: str, width: int, height: int, out: Path) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox"])
        page = browser.new_page(viewport={"width": width, "height": height})
        page.set_content(f"<html><body style='margin:0;background:transparent'>{svg}</body></html>")
        page.locator("svg").screenshot(path=str(out), omit_background=True)
        browser.close()


def main() -> None:
    PUBLIC.mkdir(exist_ok=True)
    for theme in WORD_COLOUR:
        render(logo_svg(theme), 760, 200, PUBLIC / f"logo_{theme}.png")
    render(favicon_svg(), 200, 200, PUBLIC / "favicon.png")
    print("\n".join(str(path) for path in sorted(PUBLIC.glob("*.png"))))


if __name__ == "__main__":
    main()
