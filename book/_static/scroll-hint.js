// An output or table wider than its column (a table with many columns; on a phone, most tables) scrolls
// sideways inside the column; fit.css labels it, so that the columns out of view are not missed. Run once
// the page has its final widths: after loading, after MathJax typesets the tables' symbols, on resize, and
// when a fold opens (a folded text report has no width until then).
const SCROLLERS =
  "article .cell_output .output, article .pst-scrollable-table-container, article .tag_hide-output .cell_output pre";
function labelScrollers() {
  document.querySelectorAll(SCROLLERS).forEach((box) => {
    box.classList.toggle("scrolls-sideways", box.scrollWidth > box.clientWidth + 1);
  });
}
window.addEventListener("load", () => {
  labelScrollers();
  const startup = window.MathJax && window.MathJax.startup;
  if (startup && startup.promise) startup.promise.then(labelScrollers);
});
window.addEventListener("resize", labelScrollers);
document.addEventListener("toggle", labelScrollers, true); // a <details> fold opened or closed
