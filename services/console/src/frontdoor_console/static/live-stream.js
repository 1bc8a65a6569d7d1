// Live fragments over Server-Sent Events (the handoff inbox, #16). Progressive enhancement only.
// An element with data-stream="<url>" is rendered polling (hx-trigger="every 2s"). Where the
// browser has EventSource, this runs before htmx reads the page (both scripts are deferred) and
// swaps the poll for a "stream-changed" trigger: the element re-fetches its fragment when the
// stream says "changed", and once each time the stream (re)opens, for what happened while it was
// away. A stream refused for good (429 too many open, 503, signed out) goes back to polling;
// "closed" (a closed conversation) ends it. Without EventSource, htmx polls as rendered.
(function () {
  "use strict";
  if (!window.EventSource || !window.htmx) { return; }

  function live(el) {
    var polling = el.getAttribute("hx-trigger");
    var source = new EventSource(el.getAttribute("data-stream"));
    el.setAttribute("hx-trigger", "stream-changed");
    function refresh() { htmx.trigger(el, "stream-changed"); }
    source.addEventListener("open", refresh);
    source.addEventListener("changed", refresh);
    source.addEventListener("closed", function () { source.close(); });
    source.addEventListener("error", function () {
      if (source.readyState !== EventSource.CLOSED) { return; }  // reconnecting by itself
      el.setAttribute("hx-trigger", polling);
      el.removeAttribute("data-stream-open");
      htmx.process(el);
    });
    source.addEventListener("open", function () { el.setAttribute("data-stream-open", ""); });
  }

  document.querySelectorAll("[data-stream]").forEach(live);
})();
