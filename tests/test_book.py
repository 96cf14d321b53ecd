"""The built book, opened in headless Chromium: every chapter loads, shows its figures, and is reachable."""

import functools
import http.server
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from helpers import phone
from helpers.paths import project_root

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")


def toc_pages() -> list[str]:
    """Every page of the table of contents, as paths of built HTML files."""
    toc = yaml.safe_load((project_root() / "book" / "_toc.yml").read_text())
    return [f"{toc['root']}.html"] + [f"{entry['file']}.html" for entry in toc["chapters"]]


@pytest.fixture(scope="module")
def book(tmp_path_factory) -> Path:
    """The book built from the committed chapters into a private folder (as `make book` does)."""
    output = tmp_path_factory.mktemp("book")
    toc = project_root() / "book" / "_toc.yml"
    command = [
        Path(sys.executable).with_name("jupyter-book"), "build", str(project_root()),
        "--toc", str(toc), "--path-output", str(output), "-W", "-n", "--keep-going",
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return output / "_build" / "html"


@pytest.fixture(scope="module")
def served(book):
    """The built book over HTTP on a free loopback port."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(book))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """Headless Chromium driven by chromedriver (Debian's chromium and chromium-driver packages)."""
    if not (CHROMIUM and CHROMEDRIVER):
        if os.environ.get("CI"):
            pytest.fail("chromium and chromedriver must be installed on CI (.ci/run installs them)")
        pytest.skip("chromium / chromedriver not installed")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
        "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium')}", "--window-size=1280,1000",
    ):  # fmt: skip
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    driver.set_script_timeout(30)
    yield driver
    driver.quit()


# MathJax typesets the page after it loads, table headers and glued symbols included: a page is measured
# once that is done, as a reader sees it.
TYPESET = """
const done = arguments[arguments.length - 1];
const startup = window.MathJax && window.MathJax.startup;
(startup && startup.promise ? startup.promise : Promise.resolve()).then(() => done(true), () => done(false));
"""


def load(browser, url: str) -> None:
    """Open ``url`` and wait until MathJax has typeset it."""
    browser.get(url)
    browser.execute_async_script(TYPESET)


def test_book_builds_every_page_of_the_toc(book):
    for page in toc_pages():
        assert (book / page).is_file(), page


@pytest.mark.parametrize("page", [p for p in toc_pages() if p.startswith("book/chapters/")])
def test_chapter_loads_and_shows_its_figures(browser, served, page):
    browser.get(f"{served}/{page}")
    title = browser.execute_script("return document.querySelector('article h1')?.textContent ?? ''")
    assert title.strip(), f"{page} has no heading"
    images = browser.execute_script(
        "return [...document.querySelectorAll('article img')].map("
        "i => ({src: i.currentSrc, complete: i.complete, width: i.naturalWidth, height: i.naturalHeight}))"
    )
    assert images, f"{page} shows no figure"
    empty = [
        image["src"] for image in images if not (image["complete"] and image["width"] and image["height"])
    ]
    assert not empty, f"figures that did not load: {empty}"
    text = browser.execute_script("return document.querySelector('article').innerText")
    section = browser.execute_script("return document.querySelector('article h2')?.innerText ?? ''")
    answer, badge = text.find("The answer"), text.find(" edition · measured on ")
    # the answer first, then the one-line badge naming the edition and its machine, before section 1
    assert 0 <= answer < badge < text.find(section.strip()), f"{page}: no edition badge under its answer"


NAVIGATION_LINKS = (
    "return [...document.querySelectorAll('nav.bd-docs-nav a, .bd-sidebar-primary a')].map(a => a.href)"
)


def test_navigation_reaches_every_page(browser, served):
    browser.get(f"{served}/{toc_pages()[0]}")
    deadline = time.monotonic() + 30  # the theme may finish the sidebar after the load event
    while True:
        links = browser.execute_script(NAVIGATION_LINKS)
        reached = {link.split("#")[0].removeprefix(f"{served}/") for link in links}
        missing = [page for page in toc_pages()[1:] if page not in reached]
        if not missing or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert not missing, f"not linked from the navigation: {missing}"


@pytest.mark.parametrize("page", [p for p in toc_pages() if p.startswith("book/chapters/")])
def test_readers_see_no_set_up_and_nothing_runs_off_the_page(browser, served, page):
    load(browser, f"{served}/{page}")
    shown_code = browser.execute_script(
        "return [...document.querySelectorAll('article .cell_input pre')].map(p => p.innerText)"
    )
    setup = [code for code in shown_code if "chapter.start(" in code or code.lstrip().startswith("import ")]
    setup += [code for code in shown_code if "glue(" in code]  # glue calls are bookkeeping too
    assert not setup, f"set-up code shown to readers: {setup[0][:200]}"
    assert not [code for code in shown_code if "parameters" in code and "papermill" in code.lower()]
    overflowing = browser.execute_script(RUNS_OFF)
    assert not overflowing, f"runs off the page: {overflowing[:3]}"
    broken = browser.execute_script(BROKEN_HEADERS)
    assert not broken, f"table headers broken inside a word: {broken[:5]}"


# A code block or image must fit the column; a table may be wider only inside an output that scrolls
# sideways, and that output must fit the column; a text report folded under a labelled toggle may scroll.
# Code a reader reads as code (a cell's input, a page's code block), not a printed output
CODE_BLOCKS = """const CODE = '.cell_input, div[class*="highlight-"]:not(.output)';"""
RUNS_OFF = (
    CODE_BLOCKS
    + """
const right = document.querySelector('article').getBoundingClientRect().right + 1;
const scroller = e => {
  for (let p = e.parentElement; p && p.tagName !== 'ARTICLE'; p = p.parentElement) {
    if (['auto', 'scroll'].includes(getComputedStyle(p).overflowX)) return p;
  }
  return null;
};
return [...document.querySelectorAll('article pre, article table, article img')].filter(e => {
  const box = e.tagName === 'TABLE' && scroller(e) ? scroller(e) : e;
  const foldedScroller = e.closest('details') && getComputedStyle(e).overflowX === 'auto';
  // on a phone code keeps its lines and scrolls sideways (wrapped, it broke identifiers mid-name)
  const codeScroller = e.closest(CODE) && getComputedStyle(e).whiteSpace === 'pre'
    && getComputedStyle(e).overflowX === 'auto';
  return (box === e && !foldedScroller && !codeScroller && e.scrollWidth > e.clientWidth + 1)
    || box.getBoundingClientRect().right > right;
}).map(e => e.tagName + ': ' + e.innerText.slice(0, 80));
"""
)
# Every word of every table header (split at spaces, hyphens and slashes) lies on one line.
BROKEN_HEADERS = """
const broken = [];
for (const th of document.querySelectorAll('article table th')) {
  const walker = document.createTreeWalker(th, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (const word of node.textContent.matchAll(/[^\\s\\-–\\/]+/g)) {
      const range = document.createRange();
      range.setStart(node, word.index);
      range.setEnd(node, word.index + word[0].length);
      const lines = new Set([...range.getClientRects()].map(box => Math.round(box.top)));
      if (lines.size > 1) broken.push(word[0]);
    }
  }
}
return broken;
"""


OUTSIDE_MATH = """
const copy = document.querySelector('article').cloneNode(true);
copy.querySelectorAll('.math, mjx-container, script, pre, code').forEach(e => e.remove());
return copy.textContent;
"""
TEX_GROUPS = re.compile(r"\\(?:text|mathrm|operatorname|begin|end)\{[^}]*\}|\\[A-Za-z]+")  # environments too


def math_sources(html: Path) -> list[str]:
    """The TeX of every math element of a built page, as Sphinx wrote it (before MathJax runs)."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html.read_text(), "html.parser")
    return [element.get_text() for element in soup.select("article .math")]


@pytest.mark.parametrize("page", toc_pages())
def test_no_prose_is_read_as_math(book, page):
    """A dollar amount in prose must never open math: "an $8,000 workstation … at $1.50 an hour" would
    turn the words between the two prices into a formula. No math element holds a word of prose."""
    for tex in math_sources(book / page):
        words = re.findall(r"[A-Za-z]{4,}", TEX_GROUPS.sub(" ", tex))
        assert not words, f"{page}: prose read as math: {tex[:120]!r}"


@pytest.mark.parametrize("page", toc_pages())
def test_no_dollar_sign_touches_a_formula(book, page):
    """A display formula written on the line after its paragraph's text ($$…$$ with no blank line before
    it) is read as a dollar, inline math and a dollar: the reader sees "$b ≥ …$". No "$" touches math."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup((book / page).read_text(), "html.parser")
    touching = []
    for formula in soup.select("article .math"):
        before, after = (
            str(s) if isinstance(s, str) else "" for s in (formula.previous_sibling, formula.next_sibling)
        )
        if before.endswith("$") or after.startswith("$"):
            touching.append(formula.get_text()[:60])
    assert not touching, f"{page}: a dollar sign beside a formula: {touching}"


SYMBOL = re.compile(r"(?<![\w*])[A-Za-z]\*?_[A-Za-z0-9]{1,6}\b")


@pytest.mark.parametrize("page", toc_pages())
def test_symbols_are_typeset_in_prose_and_tables(book, page):
    """ "S_min", "b*_floor" or "D_k" in plain text beside typeset math reads as a typo: in prose, glued
    sentences and tables every symbol is math. Code, the command's folded terminal output and math itself
    are left out."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup((book / page).read_text(), "html.parser")
    for element in soup.select("article pre, article code, article .math, article script, article details"):
        element.decompose()
    plain = sorted(set(SYMBOL.findall(soup.select_one("article").get_text(" "))))
    assert not plain, f"{page}: symbols as plain text: {plain}"


@pytest.mark.parametrize("page", toc_pages())
def test_tables_keep_every_row_and_read_in_words(book, page):
    """pandas cuts a table of more than 60 rows to its first and last five, with a "…" row and "72 rows ×
    4 columns" below it: the rows in between are lost to the reader. A long table folds; it keeps them.
    And no cell reads as Python: True, False, None (``chapter.readable``)."""
    from bs4 import BeautifulSoup

    text = (book / page).read_text()
    assert not re.search(r"\d+ rows × \d+ columns", text), f"{page}: a table cut short by pandas"
    cells = {cell.get_text().strip() for cell in BeautifulSoup(text, "html.parser").select("article td")}
    assert not cells & {"True", "False", "None"}, f"{page}: table cells that read as Python"


@pytest.mark.parametrize("page", toc_pages())
def test_no_markdown_backticks_reach_the_reader(book, page):
    """Glued sentences and table cells are plain text: a `name` in them must render as code (the book's
    pasted_code extension) or be written without backticks, never show its backticks."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup((book / page).read_text(), "html.parser")
    for element in soup.select("article pre, article code, article .math, article script"):
        element.decompose()
    text = soup.select_one("article").get_text()
    shown = [text[max(0, at - 40) : at + 40] for at in (m.start() for m in re.finditer("`", text))]
    assert not shown, f"{page}: backticks shown to the reader: {shown[:3]}"


@pytest.mark.parametrize("page", toc_pages())
def test_math_renders_offline_and_no_raw_delimiters_show(browser, served, page):
    """MathJax is served with the book (sphinx-mathjax-offline), not fetched from a CDN an offline reader
    cannot reach: every math element is typeset, and no raw \\( or \\) is left in the prose."""
    load(browser, f"{served}/{page}")
    sources = browser.execute_script(
        "return [...document.querySelectorAll('script[src]')].map(s => s.src).filter(s => /mathjax/i.test(s))"
    )
    assert all(source.startswith(served) for source in sources), f"{page} fetches MathJax from {sources}"
    pending = (
        "return [...document.querySelectorAll('.math')].filter(e => !e.querySelector('mjx-container')).length"
    )
    assert browser.execute_script(pending) == 0, f"{page}: math left untypeset"
    text = browser.execute_script(OUTSIDE_MATH)
    assert "\\(" not in text and "\\)" not in text, f"{page}: raw math delimiters in the prose"


# Issue 38's layout budgets, measured on the rendered page: every paragraph keeps them, the generated
# readings too (a long one is glued as Markdown paragraphs: ``chapter.glue_all``'s ``markdown``).
PARAGRAPH_WORDS, OUTPUT_LINES, TABLE_DIGITS, ANSWER_WORDS = 200, 60, 4, 45
BUDGETS = (
    CODE_BLOCKS
    + """
if (window.labelScrollers) labelScrollers();  // the page's own labelling (scroll-hint.js), at this width
const article = document.querySelector('article');
const folded = e => e.closest('details') !== null && !e.closest('details').open;
const paragraphs = [...article.querySelectorAll('p, li')].filter(p => !p.querySelector('p, li'))
  .map(p => p.innerText.trim()).map(t => [t.split(/\\s+/).length, t.slice(0, 60)])
  .filter(([words]) => words > arguments[0]);
const outputs = [...article.querySelectorAll('.cell_output pre')].filter(p => !folded(p))
  .map(p => [p.innerText.split('\\n').length, p.innerText.slice(0, 60)])
  .filter(([lines]) => lines > arguments[1]);
const plurals = [...new Set([...article.innerText.matchAll(/\\w+\\(s\\)/g)].map(m => m[0]))];
const digits = t => t.replace(/[-+,]/g, '').replace(/0+$/, '').replace('.', '').replace(/^0+/, '').length;
const floats = [...article.querySelectorAll('td')].map(t => t.innerText.trim())
  .filter(t => /^[-+]?[\\d,]*\\.\\d+$/.test(t) && digits(t) > arguments[2]);
// a phone lays a page out wider than its screen (and shrinks it to fit) when something is wider than
// the screen: the screen's own width is the measure, not the layout's
const screen = arguments[4];
const headings = [...article.querySelectorAll('h1, h2, h3')]
  .filter(h => h.getBoundingClientRect().right > screen + 1).map(h => h.innerText.slice(0, 60));
const scrolled = e => {
  for (let p = e.parentElement; p && p !== article; p = p.parentElement) {
    if (['auto', 'scroll', 'hidden'].includes(getComputedStyle(p).overflowX)) return true;
  }
  return false;
};
const wider = [...article.querySelectorAll('*')]
  .filter(e => e.getBoundingClientRect().right > screen + 1 && !scrolled(e))
  .map(e => e.tagName + ': ' + e.innerText.slice(0, 60)).slice(0, 3);
// an output wider than its column scrolls sideways and says so above it
const unlabelled = [...article.querySelectorAll('.cell_output .output, .pst-scrollable-table-container')]
  .filter(o => !folded(o) && o.scrollWidth > o.clientWidth + 1)
  .filter(o => !/scroll sideways/i.test(getComputedStyle(o, '::before').content))
  .map(o => o.innerText.slice(0, 60));
// a display formula fits the column: a long one breaks over lines instead of scrolling unlabelled
const formulas = [...article.querySelectorAll('mjx-container[display="true"]')]
  .filter(m => m.scrollWidth > m.clientWidth + 1).map(m => m.textContent.slice(0, 40));
// no figure shrinks its smallest text (arguments[6] px in its PNG) under arguments[5] px
const figures = [...article.querySelectorAll('.cell_output img')].filter(i => i.complete && i.naturalWidth)
  .map(i => i.clientWidth / i.naturalWidth * arguments[6]).filter(px => px < arguments[5] - 0.05)
  .map(px => px.toFixed(1));
// on a phone code scrolls sideways rather than wrap (wrapped, a long line broke identifiers mid-name)
const wrapped_code = screen < 600 ? [...article.querySelectorAll('pre')].filter(p => p.closest(CODE))
  .filter(p => getComputedStyle(p).whiteSpace !== 'pre').map(p => p.innerText.slice(0, 40)) : [];
// inline code breaks between its words, and inside one only where the word is wider than its block
// (the lines a word's text is laid out on, however its box is displayed; its width on one line)
const lines = w => { const r = document.createRange(); r.selectNodeContents(w);
  return new Set([...r.getClientRects()].filter(b => b.width > 0).map(b => Math.round(b.top))).size; };
const whole = w => { const was = w.style.whiteSpace; w.style.whiteSpace = 'nowrap';
  const r = document.createRange(); r.selectNodeContents(w); const width = r.getBoundingClientRect().width;
  w.style.whiteSpace = was; return width; };
const broken_names = [...article.querySelectorAll('code.literal span.pre')].filter(w => !folded(w))
  .filter(w => lines(w) > 1 && whole(w) <= w.closest('p, li, td, th, dd, dt, div').clientWidth)
  .map(w => w.innerText.slice(0, 40));
const answer = article.querySelector('.admonition.important');
const bullets = answer ? [...answer.querySelectorAll('li')].map(li => li.innerText.trim())
  .map(t => [t.split(/\\s+/).length, t.slice(0, 60)]).filter(([words]) => words > arguments[3]) : [];
return {paragraphs, outputs, plurals, floats: [...new Set(floats)], headings, wider, bullets, unlabelled,
        formulas, figures, wrapped_code, broken_names,
        answer: answer ? (answer.getBoundingClientRect().top + window.scrollY) / window.innerHeight : null,
        screens: document.documentElement.scrollHeight / window.innerHeight};
"""
)


@pytest.mark.parametrize("width", [1280, 390])
@pytest.mark.parametrize("page", toc_pages())
def test_every_page_keeps_the_layout_budgets(browser, served, page, width):
    """At 1280 px and at a phone's 390 px: no paragraph over 200 words, no output over 60 lines
    outside a fold, no "(s)" plural, no number in a table with more than 4 significant digits after its
    point's zeros, no heading wider than the screen, nothing run off the column and no page wider than the
    screen, no output scrolling sideways without saying so, no formula wider than the column, no inline
    name broken over two lines where it fits on one, no figure
    drawn so small that its smallest text shows under 9 px (a phone gets each figure's phone layout), no
    answer-box bullet over 45 words (the box answers in a sentence; what its figures are follows it), and a
    chapter's answer within its first two screens at 1280 px and on the first at 390 px."""
    # headless Chromium keeps a window at least 500 px wide: a phone's width is emulated
    metrics = {"width": width, "height": 1000, "deviceScaleFactor": 1, "mobile": width < 500}
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
    try:
        load(browser, f"{served}/{page}")
        found = browser.execute_script(
            BUDGETS,
            PARAGRAPH_WORDS,
            OUTPUT_LINES,
            TABLE_DIGITS,
            ANSWER_WORDS,
            width,
            phone.LEAST_SHOWN_PX,
            phone.SMALLEST_PX,
        )
        overflowing = browser.execute_script(RUNS_OFF)
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    long = found["paragraphs"]
    assert not long, f"{page} at {width} px: paragraphs over {PARAGRAPH_WORDS} words: {long}"
    assert not found["outputs"], (
        f"{page}: outputs over {OUTPUT_LINES} lines outside a fold: {found['outputs']}"
    )
    assert not found["plurals"], f"{page}: template plurals {found['plurals']}"
    assert not found["floats"], f"{page}: table numbers with too many digits {found['floats'][:5]}"
    assert not found["headings"], f"{page} at {width} px: headings wider than the screen {found['headings']}"
    assert not overflowing, f"{page} at {width} px: runs off the page: {overflowing[:3]}"
    assert not found["wider"], f"{page} at {width} px: wider than the screen: {found['wider']}"
    assert not found["bullets"], f"{page}: answer-box bullets over {ANSWER_WORDS} words: {found['bullets']}"
    assert not found["unlabelled"], (
        f"{page} at {width} px: scrolls sideways unlabelled: {found['unlabelled']}"
    )
    assert not found["formulas"], f"{page} at {width} px: formulas wider than the column {found['formulas']}"
    assert not found["wrapped_code"], f"{page} at {width} px: code wraps {found['wrapped_code'][:2]}"
    assert not found["broken_names"], f"{page} at {width} px: inline code broken {found['broken_names'][:3]}"
    assert not found["figures"], (
        f"{page} at {width} px: figures whose smallest text shows at {found['figures']} px"
    )
    if page.startswith("book/chapters/"):  # on a phone, the answer box starts on the first screen
        screens = 2 if width == 1280 else 1
        assert found["answer"] is not None and found["answer"] < screens, f"{page}: the answer starts late"


# Every fold opened, as a reader opens it: a folded text report wider than the column says it scrolls.
OPENED_FOLDS = """
const done = arguments[arguments.length - 1];
document.querySelectorAll('article details').forEach(d => { d.open = true; });
setTimeout(() => done([...document.querySelectorAll('article .tag_hide-output .cell_output pre')]
  .filter(p => p.scrollWidth > p.clientWidth + 1)
  .filter(p => !/scroll sideways/i.test(getComputedStyle(p, '::before').content))
  .map(p => p.innerText.slice(0, 60))), 300);
"""


@pytest.mark.parametrize("page", toc_pages())
def test_an_opened_fold_says_when_its_report_scrolls_sideways(browser, served, page):
    metrics = {"width": 390, "height": 844, "deviceScaleFactor": 1, "mobile": True}
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
    try:
        load(browser, f"{served}/{page}")
        unlabelled = browser.execute_async_script(OPENED_FOLDS)
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    assert not unlabelled, f"{page} at 390 px: an opened fold scrolls sideways unlabelled: {unlabelled}"


# Chapter 5 answers (5.1–5.7) before its reference (5.8–5.10: the loss model, the step model here, the
# roofline): the renter's table, the table a reader came for, is reached without scrolling through them.
RENTER_TABLE_SCREENS = 8
ANSWER_ORDER = """
const top = id => {
  const s = document.getElementById(id); return s ? s.getBoundingClientRect().top + window.scrollY : null; };
const renter = document.querySelector('#what-a-renter-decides > .cell table');
return {renter: renter ? (renter.getBoundingClientRect().top + window.scrollY) / window.innerHeight : null,
        answers: ['what-a-renter-decides', 'the-rule-for-your-own-model-two-conditions-on-the-per-gpu-batch',
                  'checked-against-the-seed'].map(top),
        reference: ['how-the-loss-falls-the-optimus-model',
                    'time-per-step-on-this-machine-predicted-and-checked',
                    'what-a-gpu-would-do-the-roofline-and-its-band'].map(top)};
"""


def test_the_cost_model_answers_before_its_reference(browser, served):
    """At 1280 px, chapter 5's renter table starts within its first eight screens, and every section that
    answers comes before the reference sections."""
    page = next(page for page in toc_pages() if page.endswith("05_cost_model.html"))
    browser.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": 1280, "height": 1000, "deviceScaleFactor": 1, "mobile": False},
    )
    try:
        load(browser, f"{served}/{page}")
        found = browser.execute_script(ANSWER_ORDER)
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    assert None not in found["answers"] + found["reference"], f"{page}: a section is missing: {found}"
    assert max(found["answers"]) < min(found["reference"]), f"{page}: reference before an answer: {found}"
    assert found["renter"] is not None and found["renter"] < RENTER_TABLE_SCREENS, (
        f"{page}: the renter's table starts {found['renter']} screens down"
    )
