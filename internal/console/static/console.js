// zonemq console: re-fetch the live part of the page every two seconds.
// No framework, no external script; the page works without it (reload).
(function () {
  "use strict";
  var live = document.getElementById("live");
  var updated = document.getElementById("updated");
  if (!live) { return; }
  var url = live.getAttribute("data-refresh");
  var failures = 0;

  function stamp() {
    var s = document.getElementById("stamp");
    if (!s || !updated) { return; }
    var at = new Date(parseInt(s.getAttribute("data-at"), 10));
    var secs = Math.max(0, Math.round((Date.now() - at.getTime()) / 1000));
    updated.textContent = "polled " + at.toLocaleTimeString() + (secs > 3 ? " (" + secs + "s ago)" : "") +
      (failures ? " · console unreachable" : "");
  }

  function refresh() {
    fetch(url, { cache: "no-store" }).then(function (r) {
      if (!r.ok) { throw new Error(r.status); }
      return r.text();
    }).then(function (html) {
      failures = 0;
      var scroll = window.scrollY;
      live.innerHTML = html;
      window.scrollTo(0, scroll);
      stamp();
    }).catch(function () {
      failures++;
      stamp();
    });
  }

  stamp();
  setInterval(refresh, 2000);
})();
