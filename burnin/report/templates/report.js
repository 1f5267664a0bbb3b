(function () {
  "use strict";
  // Sorting and filtering of report.html's tables. Reads only text already on the page
  // (textContent, data-* attributes) and never writes HTML: nothing a node printed is parsed here.
  var collator = new Intl.Collator(undefined, {numeric: true, sensitivity: "base"});
  var each = function (list, fn) { Array.prototype.forEach.call(list, fn); };

  function cellKey(cell) {
    if (!cell) return {n: null, s: ""};
    var raw = cell.getAttribute("data-sort");
    if (raw === null) raw = cell.textContent.trim();
    var num = Number(raw);
    return raw !== "" && isFinite(num) ? {n: num, s: raw} : {n: null, s: raw};
  }

  function compare(a, b) {
    if (a.n !== null && b.n !== null) return a.n - b.n;
    if (a.n !== null) return -1;
    if (b.n !== null) return 1;
    return collator.compare(a.s, b.s);
  }

  function sortTable(table, index, head) {
    var body = table.tBodies[0];
    var ascending = head.getAttribute("aria-sort") !== "ascending";
    var keyed = Array.prototype.map.call(body.rows, function (row, i) {
      return {row: row, key: cellKey(row.cells[index]), i: i};
    });
    keyed.sort(function (x, y) { return (ascending ? 1 : -1) * compare(x.key, y.key) || x.i - y.i; });
    each(table.tHead.rows[0].cells, function (cell) { cell.removeAttribute("aria-sort"); });
    head.setAttribute("aria-sort", ascending ? "ascending" : "descending");
    var fragment = document.createDocumentFragment();
    keyed.forEach(function (k) { fragment.appendChild(k.row); });
    body.appendChild(fragment);
  }

  function filterTable(table) {
    var terms = [];
    var wanted = "";
    each(document.querySelectorAll("[data-filter='" + table.id + "']"), function (control) {
      if (control.tagName === "SELECT") wanted = control.value;
      else terms = control.value.toLowerCase().split(/\s+/).filter(Boolean);
    });
    var rows = table.tBodies[0].rows;
    var shown = 0;
    each(rows, function (row) {
      var text = row.textContent.toLowerCase();
      var keep = terms.every(function (t) { return text.indexOf(t) >= 0; }) &&
        (!wanted || (" " + (row.getAttribute("data-state") || "") + " ").indexOf(" " + wanted + " ") >= 0);
      row.hidden = !keep;
      if (keep) shown += 1;
    });
    each(document.querySelectorAll("[data-count='" + table.id + "']"), function (counter) {
      counter.textContent = shown === rows.length ? rows.length + " rows" : shown + " of " + rows.length + " rows";
    });
  }

  each(document.querySelectorAll("table.sortable"), function (table) {
    each(table.tHead.rows[0].cells, function (head, index) {
      head.tabIndex = 0;
      head.title = "sort";
      head.addEventListener("click", function () { sortTable(table, index, head); });
      head.addEventListener("keydown", function (event) {
        if (event.key === "Enter" || event.key === " ") { event.preventDefault(); sortTable(table, index, head); }
      });
    });
    each(document.querySelectorAll("[data-filter='" + table.id + "']"), function (control) {
      control.addEventListener("input", function () { filterTable(table); });
      control.addEventListener("change", function () { filterTable(table); });
    });
    filterTable(table);
  });

  function openTarget() {
    var id = decodeURIComponent(location.hash.slice(1));
    var target = id && document.getElementById(id);
    if (target && target.tagName === "DETAILS") target.open = true;
  }
  window.addEventListener("hashchange", openTarget);
  openTarget();
  document.documentElement.setAttribute("data-report-ready", "1");
})();
