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

// A page whose live part has data-stream follows that Server-Sent Events stream and
// re-fetches its live part on each change, instead of polling (EventSource reconnects by
// itself, sending Last-Event-ID).
(function () {
  "use strict";
  function follow() {
    var box = document.querySelector("[data-stream]");
    if (box === null || !window.EventSource) {
      return;
    }
    var es = new EventSource(box.getAttribute("data-stream"));
    var changed = function () {
      if (window.htmx) {
        window.htmx.trigger(box, "duraton:changed");
      }
    };
    ["step", "status", "run"].forEach(function (name) { es.addEventListener(name, changed); });
    es.addEventListener("end", function () { changed(); es.close(); });
  }
  document.addEventListener("DOMContentLoaded", follow);
})();
