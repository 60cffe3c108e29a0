/* pkprof HTML report: the tables (flat profile and call graph, or a diff's change by routine),
 * read from the page's JSON data, and the search box that filters them and highlights matches in
 * the flame graph. Names are put into the page as text, never as HTML. */
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("pk-data").textContent);
  var flame = window.pkprofFlame || null;
  var input = document.getElementById("pk-search");
  var status = document.getElementById("pk-status");
  var table = document.getElementById("pk-flat-table");
  var note = document.getElementById("pk-flat-note");
  var ROW_LIMIT = 300;
  var KIND_CLASS = { u: "pk-u", k: "pk-k", s: "pk-s", p: "pk-p", i: "pk-i" };
  var KIND_NAME = { u: "user", k: "kernel", s: "syscall boundary", p: "Python", i: "idle" };
  var diff = data.mode === "diff";

  var rows = data.routines.map(function (r, id) {
    if (diff) {
      var sa = share(r[2], data.totalA), sb = share(r[4], data.totalB);
      var ta = share(r[3], data.totalA), tb = share(r[5], data.totalB);
      return { id: id, name: r[0], kind: r[1], sa: sa, sb: sb, ds: sb - sa,
               ta: ta, tb: tb, dt: tb - ta };
    }
    return { id: id, name: r[0], kind: r[1], self: r[2], total: r[3],
             selfPct: share(r[2], data.total), totalPct: share(r[3], data.total),
             nonIdle: share(r[2], data.nonIdle) };
  });
  var byName = new Map();
  rows.forEach(function (r) {
    byName.set(r.name, r);
  });
  var graph = new Map();
  (data.graph || []).forEach(function (g) {
    graph.set(g[0], { callers: g[1], callersRest: g[2], callees: g[3], calleesRest: g[4] });
  });

  function share(n, d) {
    return d > 0 ? 100 * n / d : 0;
  }
  function fixed(v) {
    return v.toFixed(2);
  }
  function signed(v) {
    return (v > 0 ? "+" : "") + v.toFixed(2);
  }
  function count(n) {
    return n.toLocaleString("en-US");
  }

  var columns = diff ? [
    { key: "name", label: "routine", name: true },
    { key: "sa", label: "A self %", fmt: fixed },
    { key: "sb", label: "B self %", fmt: fixed },
    { key: "ds", label: "\u0394 self (points)", fmt: signed, abs: true, sign: true },
    { key: "ta", label: "A total %", fmt: fixed },
    { key: "tb", label: "B total %", fmt: fixed },
    { key: "dt", label: "\u0394 total (points)", fmt: signed, abs: true, sign: true }
  ] : [
    { key: "name", label: "name", name: true },
    { key: "self", label: "self samples", fmt: count },
    { key: "selfPct", label: "self %", fmt: fixed },
    { key: "total", label: "total samples", fmt: count },
    { key: "totalPct", label: "total %", fmt: fixed },
    { key: "nonIdle", label: "% of non-idle", fmt: fixed }
  ];
  var sortKey = diff ? "ds" : "self";
  var sortAsc = false;
  var filter = null;
  var selected = null;

  document.getElementById("pk-flat-title").textContent =
    diff ? "Change by routine (B against A)" : "Flat profile";

  // A name too long for its column is cut in the middle: the start gets the ellipsis and the end
  // stays, since names that differ differ at the end (`lib.so!<after f>` / `<after g>`, offsets).
  // The whole name is in the tooltip and in the text (copy, search).
  var NAME_TAIL = 24;
  function nameCell(td, r) {
    var nm = document.createElement("div");
    nm.className = "pk-nm";
    var sw = document.createElement("span");
    sw.className = "pk-kind " + (KIND_CLASS[r.kind] || "");
    sw.title = KIND_NAME[r.kind] || "";
    nm.appendChild(sw);
    var chars = Array.from(r.name);
    var cut = chars.length - Math.min(NAME_TAIL, Math.floor(chars.length / 2));
    var head = document.createElement("span");
    head.className = "pk-nm-head";
    head.textContent = chars.slice(0, cut).join("");
    var tail = document.createElement("span");
    tail.className = "pk-nm-tail";
    tail.textContent = chars.slice(cut).join("");
    nm.appendChild(head);
    nm.appendChild(tail);
    td.appendChild(nm);
    td.title = r.name;
    td.className = "pk-name";
  }

  function sortValue(col, r) {
    var v = r[col.key];
    return col.abs ? Math.abs(v) : v;
  }

  function renderTable() {
    var shown = rows.filter(function (r) {
      return !filter || filter.test(r.name);
    });
    var col = columns.filter(function (c) {
      return c.key === sortKey;
    })[0];
    shown.sort(function (a, b) {
      var x = sortValue(col, a), y = sortValue(col, b);
      var c = col.name ? (x < y ? -1 : x > y ? 1 : 0) : y - x;
      return (sortAsc ? -c : c) || a.id - b.id;
    });
    table.className = "pk-t";
    table.textContent = "";
    var head = table.createTHead().insertRow();
    columns.forEach(function (c) {
      var th = document.createElement("th");
      th.textContent = c.label;
      if (c.name) {
        th.className = "pk-name";
      }
      if (c.key === sortKey) {
        th.classList.add("pk-sorted");
        th.classList.toggle("pk-asc", sortAsc !== !!c.name);
      }
      th.addEventListener("click", function () {
        sortAsc = sortKey === c.key ? !sortAsc : false;
        sortKey = c.key;
        renderTable();
      });
      head.appendChild(th);
    });
    var body = table.createTBody();
    shown.slice(0, ROW_LIMIT).forEach(function (r) {
      var tr = body.insertRow();
      tr.dataset.id = r.id;
      if (selected === r.id) {
        tr.className = "pk-selected";
      }
      columns.forEach(function (c) {
        var td = tr.insertCell();
        if (c.name) {
          nameCell(td, r);
        } else {
          var v = r[c.key];
          td.textContent = c.fmt(v);
          if (c.sign && v !== 0) {
            td.className = v > 0 ? "pk-pos" : "pk-neg";
          }
        }
      });
    });
    note.textContent = (shown.length > ROW_LIMIT ? "Showing " + ROW_LIMIT + " of " : "") +
      shown.length + (filter ? " matching " : " ") + (shown.length === 1 ? "routine" : "routines") +
      (shown.length > ROW_LIMIT ? ": search to narrow." : ".") +
      (diff ? " Shares of each profile's samples; \u0394 in percentage points." :
        " Self: samples in the routine itself; total: with its callees.");
    return shown.length;
  }

  function edgeTable(title, list, rest, of) {
    var box = document.createElement("div");
    var h = document.createElement("h4");
    h.textContent = title;
    box.appendChild(h);
    if (!list.length) {
      var p = document.createElement("p");
      p.className = "pk-note";
      p.textContent = "none";
      box.appendChild(p);
      return box;
    }
    var t = document.createElement("table");
    t.className = "pk-t";
    var head = t.createTHead().insertRow();
    ["name", "samples", "% of its total"].forEach(function (l, i) {
      var th = document.createElement("th");
      th.textContent = l;
      if (i === 0) {
        th.className = "pk-name";
      }
      head.appendChild(th);
    });
    var body = t.createTBody();
    list.forEach(function (e) {
      var r = rows[e[0]];
      var tr = body.insertRow();
      tr.dataset.id = r.id;
      nameCell(tr.insertCell(), r);
      tr.insertCell().textContent = count(e[1]);
      tr.insertCell().textContent = fixed(share(e[1], of));
    });
    if (rest > 0) {
      var tr = body.insertRow();
      tr.insertCell().textContent = "(others)";
      tr.insertCell().textContent = count(rest);
      tr.insertCell().textContent = fixed(share(rest, of));
    }
    box.appendChild(t);
    return box;
  }

  function select(id) {
    selected = id;
    Array.prototype.forEach.call(table.querySelectorAll("tr.pk-selected"), function (tr) {
      tr.classList.remove("pk-selected");
    });
    var tr = table.querySelector('tr[data-id="' + id + '"]');
    if (tr) {
      tr.classList.add("pk-selected");
    }
    var box = document.getElementById("pk-graph-body");
    if (!box) {
      return;
    }
    var r = rows[id];
    box.textContent = "";
    var h = document.createElement("h3");
    h.textContent = r.name;
    box.appendChild(h);
    var p = document.createElement("p");
    p.className = "pk-note";
    p.textContent = "self " + count(r.self) + " samples (" + fixed(r.selfPct) + "%), total " +
      count(r.total) + " (" + fixed(r.totalPct) + "%), " + (KIND_NAME[r.kind] || "") + ".";
    box.appendChild(p);
    var g = graph.get(id);
    if (!g) {
      var q = document.createElement("p");
      q.className = "pk-note";
      q.textContent = "No call-graph entry: the page keeps the " + data.graphRoutines +
        " routines of most total samples.";
      box.appendChild(q);
      return;
    }
    box.appendChild(edgeTable("Called by (samples it was called with)", g.callers,
                              g.callersRest, r.total));
    box.appendChild(edgeTable("Calls (samples spent in each callee)", g.callees,
                              g.calleesRest, r.total));
  }

  function onRowClick(e) {
    var tr = e.target.closest("tr");
    if (tr && tr.dataset.id !== undefined && tr.parentNode.tagName === "TBODY") {
      select(parseInt(tr.dataset.id, 10));
    }
  }

  function regex(term) {
    if (!term) {
      return null;
    }
    try {
      input.classList.remove("pk-bad");
      return new RegExp(term, "i");
    } catch (err) {
      input.classList.add("pk-bad");
      return new RegExp(term.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"), "i");
    }
  }

  function applySearch() {
    filter = regex(input.value.trim());
    var n = renderTable();
    var matched = flame ? flame.search(filter) : null;
    if (!filter) {
      status.textContent = "";
    } else {
      status.textContent = n + " routine" + (n === 1 ? "" : "s") + " match" +
        (matched === null ? "; no frame in the flame graph" :
          "; " + matched.toFixed(1) + "% of the flame graph");
    }
  }

  var timer = null;
  input.addEventListener("input", function () {
    clearTimeout(timer);
    timer = setTimeout(applySearch, 120);
  });
  input.addEventListener("keydown", function (e) {
    if (e.key === "Enter") {
      clearTimeout(timer);
      applySearch();
    }
  });
  document.addEventListener("keydown", function (e) {
    if ((e.ctrlKey && e.key === "f") || e.key === "F3") {
      e.preventDefault();
      input.focus();
      input.select();
    }
  });
  document.addEventListener("pk-search-button", function (e) {
    if (e.detail) {
      input.value = "";
      applySearch();
    } else {
      input.focus();
    }
  });
  document.addEventListener("pk-frame", function (e) {
    var r = byName.get(e.detail);
    if (r && !diff) {
      select(r.id);
    }
  });
  document.getElementById("pk-unzoom").addEventListener("click", function () {
    if (flame) {
      flame.unzoom();
    }
  });
  table.addEventListener("click", onRowClick);
  var graphBox = document.getElementById("pk-graph-body");
  if (graphBox) {
    graphBox.addEventListener("click", onRowClick);
  }

  renderTable();
  if (!diff && rows.length) {
    select(0);
  }
  if (input.value) {
    applySearch();
  }
})();
