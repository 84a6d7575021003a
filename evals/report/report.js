// Filters the flipped items by task, direction and text, in the page, without a server.
// It only reads the DOM and toggles the `hidden` attribute; it never writes HTML.
(function () {
  "use strict";
  var form = document.getElementById("item-filter");
  if (!form) { return; }
  var items = Array.prototype.slice.call(document.querySelectorAll("#flipped-list > .item"));
  var task = document.getElementById("filter-task");
  var direction = document.getElementById("filter-direction");
  var search = document.getElementById("filter-text");
  var count = document.getElementById("filter-count");
  var text = items.map(function (el) { return el.textContent.toLowerCase(); });

  function apply() {
    var t = task.value, d = direction.value, q = search.value.trim().toLowerCase();
    var shown = 0;
    items.forEach(function (el, i) {
      var keep = (!t || el.getAttribute("data-task") === t) &&
        (!d || el.getAttribute("data-direction") === d) &&
        (!q || text[i].indexOf(q) !== -1);
      el.hidden = !keep;
      if (keep) { shown += 1; }
    });
    count.textContent = shown + " of " + items.length + " shown";
  }

  form.addEventListener("input", apply);
  form.addEventListener("change", apply);
  form.addEventListener("submit", function (event) { event.preventDefault(); });
  form.hidden = false;
  apply();
})();
