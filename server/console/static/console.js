// Shows every <time datetime> in the viewer's time zone; its title keeps the UTC time.
(function () {
  "use strict";
  function localise(root) {
    root.querySelectorAll("time[datetime]").forEach(function (t) {
      var d = new Date(t.getAttribute("datetime"));
      if (!isNaN(d.getTime())) {
        t.textContent = d.toLocaleString();
      }
    });
  }
  document.addEventListener("DOMContentLoaded", function () { localise(document); });
  document.addEventListener("htmx:afterSettle", function (e) { localise(e.target); });
})();
