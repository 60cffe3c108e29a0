/* pkprof HTML report: makes the inline flame graph (inferno's SVG, drawn without its own script)
 * interactive: click to zoom, faded parents or "Reset Zoom" to zoom out, hover for details, search
 * highlighting, and a width that follows the window. Exposes window.pkprofFlame for the tables. */
(function () {
  "use strict";
  var host = document.getElementById("pk-flame");
  var svg = host ? host.querySelector("svg") : null;
  var frames = svg ? svg.querySelector("#frames") : null;
  if (!frames) {
    return;
  }
  var XPAD = 10;
  var SEARCH_COLOR = "rgb(230,0,230)";
  var details = svg.querySelector("#details");
  var unzoomText = svg.querySelector("#unzoom");
  var searchText = svg.querySelector("#search");
  var matchedText = svg.querySelector("#matched");
  var total = parseInt(frames.getAttribute("total_samples"), 10) || 1;
  var nodes = [];
  var byGroup = new Map();
  var zoomed = null;
  var searching = false;
  var charWidth = 7;

  Array.prototype.forEach.call(frames.children, function (g) {
    var rect = g.querySelector("rect");
    var title = g.querySelector("title");
    if (!rect || !title) {
      return;
    }
    var full = title.textContent;
    var n = {
      g: g,
      rect: rect,
      text: g.querySelector("text"),
      title: full,
      name: full.replace(/ \([^(]*\)$/, ""),
      x: parseInt(rect.getAttribute("fg:x"), 10),
      w: parseInt(rect.getAttribute("fg:w"), 10),
      y: parseFloat(rect.getAttribute("y")),
      fill: rect.getAttribute("fill")
    };
    nodes.push(n);
    byGroup.set(g, n);
  });

  function pct(v) {
    return v.toFixed(4) + "%";
  }

  function framesWidth() {
    return parseFloat(frames.getAttribute("width")) || 1;
  }

  function measure() {
    var probe = nodes.length ? nodes[0].text : null;
    if (!probe) {
      return;
    }
    var saved = probe.textContent;
    var sample = "abcdefghijklmnopqrstuvwxyz0123456789";
    probe.textContent = sample;
    var w = probe.getComputedTextLength();
    probe.textContent = saved;
    if (w > 0) {
      charWidth = w / sample.length;
    }
  }

  function fitText(n) {
    if (!n.text) {
      return;
    }
    var fw = framesWidth();
    var x = parseFloat(n.rect.getAttribute("x"));
    var w = parseFloat(n.rect.getAttribute("width")) * fw / 100 - 3;
    n.text.setAttribute("x", pct(x + 100 * 3 / fw));
    var label = n.name;
    if (w < 2 * charWidth) {
      n.text.textContent = "";
    } else if (label.length * charWidth < w) {
      n.text.textContent = label;
    } else {
      n.text.textContent = label.substring(0, Math.floor(w / charWidth) - 2) + "..";
    }
  }

  function fitAll() {
    nodes.forEach(function (n) {
      if (!n.g.classList.contains("hide")) {
        fitText(n);
      }
    });
  }

  function layout() {
    var width = host.clientWidth || 1200;
    frames.setAttribute("width", Math.max(width - 2 * XPAD, 10));
    if (searchText) {
      searchText.setAttribute("x", width - XPAD);
    }
    if (matchedText) {
      matchedText.setAttribute("x", width - XPAD);
    }
    fitAll();
  }

  function place(n, x, w) {
    n.rect.setAttribute("x", pct(x));
    n.rect.setAttribute("width", pct(w));
  }

  function unzoom() {
    zoomed = null;
    if (unzoomText) {
      unzoomText.classList.add("hide");
    }
    nodes.forEach(function (n) {
      n.g.classList.remove("hide", "parent");
      place(n, 100 * n.x / total, 100 * n.w / total);
    });
    fitAll();
  }

  function zoom(z) {
    zoomed = z;
    if (unzoomText) {
      unzoomText.classList.remove("hide");
    }
    var xmax = z.x + z.w;
    nodes.forEach(function (n) {
      var g = n.g;
      if (n.y > z.y) {
        // Below the zoomed frame: its ancestors span it; everything else goes.
        if (n.x <= z.x && n.x + n.w >= xmax) {
          g.classList.remove("hide");
          g.classList.add("parent");
          place(n, 0, 100);
        } else {
          g.classList.add("hide");
        }
      } else if (n.x < z.x || n.x >= xmax) {
        g.classList.add("hide");
      } else {
        g.classList.remove("hide", "parent");
        place(n, 100 * (n.x - z.x) / z.w, 100 * n.w / z.w);
      }
    });
    fitAll();
  }

  /* Highlights the frames whose name matches `re` (null: none); returns the matched share (%) of
   * the graph, counting nested matches once. */
  function search(re) {
    var matches = [];
    nodes.forEach(function (n) {
      if (re && re.test(n.name)) {
        n.rect.setAttribute("fill", SEARCH_COLOR);
        matches.push(n);
      } else {
        n.rect.setAttribute("fill", n.fill);
      }
    });
    searching = matches.length > 0;
    matches.sort(function (a, b) {
      return a.x - b.x || b.w - a.w;
    });
    var covered = 0;
    var end = -1;
    matches.forEach(function (n) {
      if (n.x >= end) {
        covered += n.w;
        end = n.x + n.w;
      }
    });
    var share = 100 * covered / total;
    if (matchedText) {
      matchedText.classList.toggle("hide", !searching);
      matchedText.textContent = searching ? "Matched: " + share.toFixed(1) + "%" : "";
    }
    if (searchText) {
      searchText.classList.toggle("show", searching);
      searchText.textContent = searching ? "Reset Search" : "Search";
    }
    return searching ? share : null;
  }

  frames.addEventListener("click", function (e) {
    var g = e.target.closest("g");
    var n = g ? byGroup.get(g) : null;
    if (!n) {
      return;
    }
    if (g.classList.contains("parent")) {
      unzoom();
    }
    zoom(n);
    document.dispatchEvent(new CustomEvent("pk-frame", { detail: n.name }));
  });
  frames.addEventListener("mouseover", function (e) {
    var g = e.target.closest("g");
    var n = g ? byGroup.get(g) : null;
    if (n && details) {
      details.textContent = "Function: " + n.title;
    }
  });
  frames.addEventListener("mouseout", function () {
    if (details) {
      details.textContent = " ";
    }
  });
  if (unzoomText) {
    unzoomText.addEventListener("click", unzoom);
  }
  if (searchText) {
    searchText.addEventListener("click", function () {
      document.dispatchEvent(new CustomEvent("pk-search-button", { detail: searching }));
    });
  }
  var resizeTimer = null;
  window.addEventListener("resize", function () {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(layout, 100);
  });

  // Fluid width, as inferno's own script does: the SVG follows its box.
  svg.removeAttribute("width");
  svg.removeAttribute("viewBox");
  measure();
  layout();

  window.pkprofFlame = {
    search: search,
    unzoom: unzoom,
    isZoomed: function () {
      return zoomed !== null;
    }
  };
})();
