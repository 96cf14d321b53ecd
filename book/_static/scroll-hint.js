// An output or table wider than its column (a table with many columns; on a phone, most tables) scrolls
// sideways inside the column; fit.css labels it, so that the columns out of view are not missed. Run once
// the page has its final widths: after loading, after MathJax typesets the tables' symbols, and on resize.
const SCROLLERS = "article .cell_output .output, article .pst-scrollable-table-container";
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
