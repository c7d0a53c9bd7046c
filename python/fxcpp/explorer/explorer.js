// fxcpp graph explorer: draws the data embedded in the page (see _model.py).
// Every text from the graph goes through textContent / createTextNode, never
// through innerHTML. Layouts come from the C++ core, one per group with its
// items folded; expanding a group re-composes the coordinates of that group's
// ancestors only (Note [Composing fold levels] in docs/design.md).
(function () {
  'use strict';
  var SVGNS = 'http://www.w3.org/2000/svg';
  var PAD = 10, HDR = 22;
  var $ = function (id) { return document.getElementById(id); };
  var D, N, G, nNodes, expanded, cache, selected = -1, view = {x: 20, y: 20, s: 1};
  var matches = [], matchAt = -1, lastQuery = '';
  var timings = window.fxcppTimings = {};

  function fail(msg) {
    var b = $('banner');
    b.textContent = msg;
    b.style.display = 'block';
  }

  function el(tag, attrs, parent) {
    var e = document.createElementNS(SVGNS, tag);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }

  function hel(tag, cls, text, parent) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }

  // ---- composition ----------------------------------------------------------

  function folded(ref) {
    return ref >= 0 ? [N.w[ref], N.h[ref]] : [G[-ref - 1].w, G[-ref - 1].h];
  }

  function size(ref) {
    if (ref >= 0 || !expanded[-ref - 1]) return folded(ref);
    var c = compose(-ref - 1), f = folded(ref);
    return [Math.max(f[0], c.w + 2 * PAD), Math.max(f[1], c.h + HDR + 2 * PAD)];
  }

  function lowerBound(arr, x) {
    var lo = 0, hi = arr.length;
    while (lo < hi) { var m = (lo + hi) >> 1; if (arr[m] < x) lo = m + 1; else hi = m; }
    return lo;
  }

  // The layout of group g with its expanded items grown: x grows by inserting
  // each grown box's extra width right of it (every layer alike), y by
  // growing each layer to its tallest box. Order, layers and bends stay the
  // C++ layout's, so nothing overlaps that did not before.
  function compose(g) {
    if (cache[g]) return cache[g];
    var grp = G[g], L = grp.lay, items = grp.items, nb = items.length + 2, bx = L.bx;
    var sw = new Array(nb), sh = new Array(nb), i;
    var grow = [];
    for (i = 0; i < nb; i++) {
      var s = i < items.length ? size(items[i]) : [bx[4 * i + 2], bx[4 * i + 3]];
      sw[i] = s[0]; sh[i] = s[1];
      var dw = s[0] - bx[4 * i + 2];
      if (dw > 0) grow.push([bx[4 * i] + bx[4 * i + 2], dw]);
    }
    grow.sort(function (a, b) { return a[0] - b[0]; });
    var gx = [], gsum = [0];
    for (i = 0; i < grow.length; i++) { gx.push(grow[i][0]); gsum.push(gsum[i] + grow[i][1]); }
    var mapx = function (x) { return x + gsum[lowerBound(gx, x)]; };
    var nl = L.lt.length, H = L.lh.slice(), top = new Array(nl);
    for (i = 0; i < nb; i++) { var l = L.layer[i]; if (sh[i] > H[l]) H[l] = sh[i]; }
    for (l = 0; l < nl; l++)
      top[l] = l ? top[l - 1] + H[l - 1] + (L.lt[l] - L.lt[l - 1] - L.lh[l - 1]) : 0;
    var rect = new Array(nb), W = 0, HH = nl ? top[nl - 1] + H[nl - 1] : 0;
    for (i = 0; i < nb; i++) {
      var ly = L.layer[i], x = mapx(bx[4 * i]);
      rect[i] = [x, top[ly] + (H[ly] - sh[i]) / 2, sw[i], sh[i]];
      if (i < items.length && x + sw[i] > W) W = x + sw[i];
    }
    var centres = L.lt.map(function (t, k) { return t + L.lh[k] / 2; });
    var edges = [];
    for (var e = 0; e < L.edges.length; e++) {
      var E = L.edges[e], p = E[4], rev = E[5], a = rect[E[0]], b = rect[E[1]], pts = [];
      if (!p.length) continue;
      pts.push(a[0] + a[2] / 2, rev ? a[1] : a[1] + a[3]);
      for (var k = 2; k + 2 < p.length; k += 2) {
        var li = Math.min(nl - 1, lowerBound(centres, p[k + 1] - 0.5)), X = mapx(p[k]);
        if (rev) pts.push(X, top[li] + H[li], X, top[li]);
        else pts.push(X, top[li], X, top[li] + H[li]);
      }
      pts.push(b[0] + b[2] / 2, rev ? b[1] + b[3] : b[1]);
      edges.push({e: E, pts: pts});
    }
    return (cache[g] = {w: W, h: HH, rect: rect, edges: edges});
  }

  function invalidate(g) {
    while (g >= 0) { cache[g] = null; g = G[g].parent; }
  }

  // ---- drawing --------------------------------------------------------------

  function status(i) { return D.diff ? D.diff.status[i] : 0; }
  var STATUS = ['', 'added', 'removed', 'changed'];

  // Each level's drawing is a <g> in the level's own coordinates, cached with
  // its composition: a click re-draws only the toggled group's ancestors'
  // levels (their edges and boxes move) and reuses every other open level's
  // subtree, so its cost does not grow with what is already open.
  var levelDom = [], nodeEl = {};

  function drawLevel(g) {
    if (levelDom[g]) return levelDom[g];
    var c = compose(g), items = G[g].items, i;
    var root = el('g', {'class': 'level', 'data-level': g});
    var gEdges = el('g', {'class': 'edges'}, root), gBoxes = el('g', {'class': 'boxes'}, root);
    for (i = 0; i < c.edges.length; i++) {
      var ed = c.edges[i], E = ed.e, pts = ed.pts, d = 'M';
      for (var k = 0; k < pts.length; k += 2) d += (k ? ' L' : '') + pts[k].toFixed(1) + ' ' + pts[k + 1].toFixed(1);
      var cls = 'edge' + (E[0] >= items.length || E[1] >= items.length ? ' port' : '') + (E[6] ? ' ' + STATUS[E[6]] : '');
      var path = el('path', {d: d, 'class': cls, 'marker-end': 'url(#arrow)'}, gEdges);
      if (E[2] > 1) path.setAttribute('stroke-width', Math.min(4, 1 + Math.log2(E[2])).toFixed(1));
      if (E[3] && E[1] < items.length && E[0] < items.length) {
        var n = pts.length, t = el('text', {x: (pts[n - 2] + 4).toFixed(1), y: (pts[n - 1] - 6).toFixed(1),
                                             'class': 'elabel'}, gEdges);
        t.textContent = E[3];
      }
    }
    var used = {};
    for (i = 0; i < G[g].lay.edges.length; i++) { used[G[g].lay.edges[i][0]] = 1; used[G[g].lay.edges[i][1]] = 1; }
    for (i = 0; i < items.length + 2; i++) {
      var r = c.rect[i];
      if (i >= items.length) {
        if (used[i] && g !== 0) el('circle', {cx: r[0] + r[2] / 2, cy: r[1] + r[3] / 2, r: 3, 'class': 'portdot'}, gBoxes);
        continue;
      }
      var ref = items[i];
      if (ref >= 0) drawNode(ref, r, gBoxes);
      else drawGroup(-ref - 1, r, gBoxes);
    }
    return (levelDom[g] = root);
  }

  function drawNode(i, r, parent) {
    var st = status(i);
    var gr = el('g', {'class': 'node op-' + N.op[i] + (N.module[i] ? ' module' : '') + (st ? ' ' + STATUS[st] : '') +
                               (i === selected ? ' selected' : ''),
                      'data-node': i, transform: 'translate(' + r[0].toFixed(1) + ',' + r[1].toFixed(1) + ')'}, parent);
    // A node that is a module (a call_module node, or an exported module's
    // only op) is drawn as the same kind of box as a folded group, so a
    // model's top level reads like the model (conv1, ..., layer1, ..., fc).
    var m = !!N.module[i];
    el('rect', {width: r[2], height: r[3], rx: m ? 6 : 4}, gr);
    var t1 = el('text', {x: m ? 10 : 8, y: m ? 16 : 14, 'class': 'name'}, gr); t1.textContent = N.label[i];
    var t2 = el('text', {x: m ? 10 : 8, y: m ? 31 : 28, 'class': 'sub'}, gr); t2.textContent = N.sub[i];
    var tt = el('title', {}, gr); tt.textContent = N.name[i] + '\n' + N.op[i] + ' ' + N.target[i] + (N.shape[i] ? '\n' + N.shape[i] + ' ' + N.dtype[i] : '');
    nodeEl[i] = gr;
  }

  function changesIn(g) { return D.diff ? D.diff.gchanges[g] : 0; }

  function drawGroup(g, r, gBoxes) {
    var grp = G[g], open = !!expanded[g], ch = changesIn(g);
    var gr = el('g', {'class': 'group' + (open ? ' open' : ' folded') + (ch ? ' haschanges' : ''),
                      'data-group': g, transform: 'translate(' + r[0].toFixed(1) + ',' + r[1].toFixed(1) + ')'}, gBoxes);
    el('rect', {width: r[2], height: r[3], rx: 6}, gr);
    var t1 = el('text', {x: 10, y: open ? 15 : 16, 'class': 'name'}, gr);
    t1.textContent = (open ? '\u25be ' : '\u25b8 ') + grp.label;
    if (!open) {
      var t2 = el('text', {x: 10, y: 31, 'class': 'sub'}, gr);
      t2.textContent = (grp.type ? grp.type + ' \u00b7 ' : '') + grp.count + ' nodes';
    }
    if (ch) {
      var b = el('text', {x: r[2] - 6, y: 14, 'class': 'badge', 'text-anchor': 'end'}, gr);
      b.textContent = '\u0394' + ch;
    }
    var tt = el('title', {}, gr); tt.textContent = (grp.path || '(root)') + (grp.type ? ' (' + grp.type + ')' : '') + ': ' + grp.count + ' nodes';
    if (open) {
      // The open group's own level, reused when it is cached; a wrapper
      // carries the offset so that the level keeps its local coordinates.
      var wrap = el('g', {transform: 'translate(' + (r[0] + PAD).toFixed(1) + ',' + (r[1] + HDR + PAD).toFixed(1) + ')'},
                    gBoxes);
      wrap.appendChild(drawLevel(g));
    }
  }

  // Where item `ref` (node i >= 0, group -(g+1)) is in drawing coordinates.
  function absRect(ref) {
    var g = ref >= 0 ? N.group[ref] : G[-ref - 1].parent, local = null, ox = 0, oy = 0, cur = ref;
    while (g >= 0) {
      var idx = G[g].items.indexOf(cur), r = compose(g).rect[idx];
      if (!local) local = [r[0], r[1], r[2], r[3]];
      else { ox += r[0] + PAD; oy += r[1] + HDR + PAD; }
      cur = -(g + 1);
      g = G[g].parent;
    }
    return local ? [local[0] + ox, local[1] + oy, local[2], local[3]] : [0, 0, 0, 0];
  }

  function render() {
    var t0 = performance.now();
    var vp = $('viewport');
    while (vp.firstChild) vp.removeChild(vp.firstChild);
    for (var g = 0; g < G.length; g++) if (!cache[g]) levelDom[g] = null;
    vp.appendChild(drawLevel(0));
    applyView();
    var c = compose(0);
    $('stats').textContent = nNodes + ' nodes, ' + G.length + ' groups; drawing ' + Math.round(c.w) + '\u00d7' + Math.round(c.h);
    timings.lastRender = performance.now() - t0;
    syncOutline();
    return timings.lastRender;
  }

  function setSelected(i) {
    if (selected >= 0 && nodeEl[selected]) nodeEl[selected].classList.remove('selected');
    selected = i;
    if (i >= 0 && nodeEl[i]) nodeEl[i].classList.add('selected');
  }

  // ---- view -----------------------------------------------------------------

  function applyView() {
    $('viewport').setAttribute('transform', 'translate(' + view.x.toFixed(1) + ',' + view.y.toFixed(1) + ') scale(' + view.s.toFixed(4) + ')');
  }

  function fit() {
    var c = compose(0), svg = $('canvas'), W = svg.clientWidth || 800, H = svg.clientHeight || 600;
    view.s = Math.min(1.5, Math.max(0.02, Math.min((W - 40) / Math.max(1, c.w), (H - 40) / Math.max(1, c.h))));
    view.x = (W - c.w * view.s) / 2; view.y = 20;
    applyView();
  }

  function centreOn(r) {
    var svg = $('canvas'), W = svg.clientWidth || 800, H = svg.clientHeight || 600;
    if (view.s < 0.6) view.s = 1;
    view.x = W / 2 - (r[0] + r[2] / 2) * view.s;
    view.y = H / 2 - (r[1] + r[3] / 2) * view.s;
    applyView();
  }

  function zoomAt(f, cx, cy) {
    var s = Math.min(8, Math.max(0.01, view.s * f));
    view.x = cx - (cx - view.x) * s / view.s;
    view.y = cy - (cy - view.y) * s / view.s;
    view.s = s;
    applyView();
  }

  // ---- interaction ----------------------------------------------------------

  function toggle(g) {
    if (g === 0) return;
    var t0 = performance.now();
    expanded[g] = !expanded[g];
    invalidate(g);
    render();
    timings.lastToggle = performance.now() - t0;
  }

  function reveal(i) {
    var g = N.group[i], changed = false;
    while (g > 0) {
      if (!expanded[g]) { expanded[g] = true; invalidate(g); changed = true; }
      g = G[g].parent;
    }
    return changed;
  }

  function select(i, jump) {
    if (i >= 0 && reveal(i)) render();
    setSelected(i);
    if (i >= 0 && jump) centreOn(absRect(i));
    showDetails(i);
  }

  function linkTo(i, parent) {
    var a = hel('a', 'nodelink', N.name[i], parent);
    a.href = '#';
    a.setAttribute('data-link', i);
    a.addEventListener('click', function (ev) { ev.preventDefault(); select(i, true); });
    return a;
  }

  function segments(segs, parent) {
    for (var k = 0; k < segs.length; k++) {
      if (typeof segs[k] === 'number') linkTo(segs[k], parent);
      else parent.appendChild(document.createTextNode(segs[k]));
    }
  }

  function row(tbl, key, fill) {
    var tr = hel('tr', null, undefined, tbl);
    hel('th', null, key, tr);
    var td = hel('td', null, undefined, tr);
    td.setAttribute('data-key', key);
    if (typeof fill === 'string') td.textContent = fill;
    else fill(td);
  }

  function showDetails(i) {
    var box = $('details');
    while (box.firstChild) box.removeChild(box.firstChild);
    if (i < 0) {
      hel('p', 'hint', 'Click a node for its details; click a group to expand or fold it. Keys: arrows pan, ' +
          '+ and - zoom, 0 fits, / searches, Esc clears.', box);
      return;
    }
    hel('h3', null, N.name[i], box);
    var tbl = hel('table', null, undefined, box);
    var st = status(i);
    if (st) row(tbl, 'diff', STATUS[st] + (st === 3 && D.diff.why && D.diff.why[i] ? ': ' + D.diff.why[i] : ''));
    row(tbl, 'opcode', N.op[i]);
    row(tbl, 'target', N.target[i]);
    row(tbl, 'args', function (td) { segments(N.args[i], td); });
    row(tbl, 'kwargs', function (td) { segments(N.kwargs[i], td); });
    row(tbl, 'users', function (td) {
      var u = N.users[i];
      for (var k = 0; k < u.length; k++) { if (k) td.appendChild(document.createTextNode(', ')); linkTo(u[k], td); }
    });
    row(tbl, 'shape', N.shape[i] || '');
    row(tbl, 'dtype', N.dtype[i] || '');
    row(tbl, 'module', G[N.group[i]].path || '(root)');
    if (N.stack[i]) { hel('h4', null, 'stack_trace', box); hel('pre', 'stack', N.stack[i], box); }
  }

  function search(q) {
    q = q.trim().toLowerCase();
    if (!q) { matches = []; $('searchinfo').textContent = ''; return; }
    if (q !== lastQuery) {
      lastQuery = q; matches = []; matchAt = -1;
      for (var i = 0; i < nNodes; i++)
        if (N.name[i].toLowerCase().indexOf(q) >= 0 || N.target[i].toLowerCase().indexOf(q) >= 0 || N.op[i].toLowerCase() === q)
          matches.push(i);
      // Exact names first.
      matches.sort(function (a, b) { return (N.name[b].toLowerCase() === q) - (N.name[a].toLowerCase() === q) || a - b; });
    }
    if (!matches.length) { $('searchinfo').textContent = 'no match'; return; }
    matchAt = (matchAt + 1) % matches.length;
    $('searchinfo').textContent = (matchAt + 1) + ' / ' + matches.length;
    select(matches[matchAt], true);
  }

  // ---- outline --------------------------------------------------------------

  var outlineItems = {};
  function buildOutline() {
    var root = $('outline');
    var ul = hel('ul', null, undefined, root);
    var stack = [[0, ul]];
    // Iterative, groups only, capped so a huge tree stays cheap.
    var shown = 0;
    while (stack.length && shown < 3000) {
      var top = stack.pop(), g = top[0], parent = top[1];
      // Groups and module nodes (once per module), in the order of their
      // first op (_model.py _outline()): the module tree as the model prints it.
      var kids = G[g].outline;
      for (var k = kids.length - 1; k >= 0; k--) {
        var li = document.createElement('li');
        parent.insertBefore(li, parent.firstChild);
        if (kids[k] >= 0) { outlineModule(kids[k], li); shown++; continue; }
        var c = -kids[k] - 1;
        var a = hel('a', 'outline-group' + (changesIn(c) ? ' haschanges' : ''), G[c].label + (changesIn(c) ? ' \u0394' + changesIn(c) : ''), li);
        a.href = '#';
        a.setAttribute('data-outline', c);
        a.title = G[c].path + (G[c].type ? ' (' + G[c].type + ')' : '');
        (function (c) {
          a.addEventListener('click', function (ev) {
            ev.preventDefault();
            var g2 = G[c].parent;
            while (g2 > 0) { if (!expanded[g2]) { expanded[g2] = true; invalidate(g2); } g2 = G[g2].parent; }
            if (!expanded[c]) { expanded[c] = true; invalidate(c); }
            render();
            centreOn(absRect(-(c + 1)));
          });
        })(c);
        outlineItems[c] = a;
        shown++;
        if (G[c].outline.length) stack.push([c, hel('ul', null, undefined, li)]);
      }
    }
  }

  function outlineModule(i, li) {
    var t = N.module[i], a = hel('a', 'outline-module' + (status(i) ? ' haschanges' : ''),
                                 t.slice(t.lastIndexOf('.') + 1), li);
    a.href = '#';
    a.setAttribute('data-outline-node', i);
    a.title = t + (N.sub[i] ? ' (' + N.sub[i] + ')' : '');
    a.addEventListener('click', function (ev) { ev.preventDefault(); select(i, true); });
  }

  function syncOutline() {
    for (var g in outlineItems) outlineItems[g].classList.toggle('open', !!expanded[g]);
  }

  // ---- start ----------------------------------------------------------------

  function start() {
    var t0 = performance.now();
    try {
      D = JSON.parse($('fxcpp-data').textContent);
    } catch (e) {
      fail('fxcpp explorer: the embedded graph data cannot be read (' + e.message + ')');
      return;
    }
    if (D.error) { fail(D.error); return; }
    N = D.nodes; G = D.groups; nNodes = N.name.length;
    expanded = new Array(G.length); cache = new Array(G.length);
    expanded[0] = true;
    $('title').textContent = D.name;
    if (D.diff) {
      var s = D.diff.summary, sum = $('summary');
      sum.textContent = s.added + ' added, ' + s.removed + ' removed, ' + s.changed + ' changed';
      sum.style.display = 'inline';
    }
    if (D.warning) fail(D.warning);
    buildOutline();
    render();
    fit();
    showDetails(-1);
    timings.firstDraw = performance.now() - t0;
    // Since navigation start (reading the file, parsing the page and its
    // data, drawing) until the first frame with the drawing is produced.
    requestAnimationFrame(function () { setTimeout(function () { timings.firstFrame = performance.now(); }, 0); });
    var svg = $('canvas'), drag = null;
    svg.addEventListener('click', function (ev) {
      if (drag && drag.moved) return;
      var t = ev.target.closest('[data-node],[data-group]');
      if (!t) return;
      if (t.hasAttribute('data-node')) { select(+t.getAttribute('data-node'), false); return; }
      var g = +t.getAttribute('data-group');
      if (expanded[g] && ev.target.closest('text') === null && ev.offsetY !== undefined) {
        // A click inside an open group's body (not its header) does nothing.
        var r = absRect(-(g + 1)), y = (ev.offsetY - view.y) / view.s - r[1];
        if (y > HDR) return;
      }
      toggle(g);
    });
    svg.addEventListener('mousedown', function (ev) { drag = {x: ev.clientX, y: ev.clientY, vx: view.x, vy: view.y, moved: false}; });
    window.addEventListener('mousemove', function (ev) {
      if (!drag || ev.buttons !== 1) return;
      var dx = ev.clientX - drag.x, dy = ev.clientY - drag.y;
      if (Math.abs(dx) + Math.abs(dy) > 3) drag.moved = true;
      view.x = drag.vx + dx; view.y = drag.vy + dy; applyView();
    });
    window.addEventListener('mouseup', function () { setTimeout(function () { drag = null; }, 0); });
    svg.addEventListener('wheel', function (ev) {
      ev.preventDefault();
      var r = svg.getBoundingClientRect();
      zoomAt(Math.exp(-ev.deltaY * 0.0015), ev.clientX - r.left, ev.clientY - r.top);
    }, {passive: false});
    document.addEventListener('keydown', function (ev) {
      if (ev.target && ev.target.tagName === 'INPUT') return;
      var svgW = svg.clientWidth / 2, svgH = svg.clientHeight / 2, step = 60;
      switch (ev.key) {
        case '+': case '=': zoomAt(1.25, svgW, svgH); break;
        case '-': case '_': zoomAt(0.8, svgW, svgH); break;
        case '0': fit(); break;
        case 'ArrowLeft': view.x += step; applyView(); break;
        case 'ArrowRight': view.x -= step; applyView(); break;
        case 'ArrowUp': view.y += step; applyView(); break;
        case 'ArrowDown': view.y -= step; applyView(); break;
        case '/': ev.preventDefault(); $('search').focus(); return;
        case 'Escape': select(-1, false); return;
        default: return;
      }
      ev.preventDefault();
    });
    $('search').addEventListener('keydown', function (ev) {
      if (ev.key === 'Enter') { ev.preventDefault(); search($('search').value); }
    });
    $('fitbtn').addEventListener('click', fit);
    $('foldbtn').addEventListener('click', function () {
      expanded = new Array(G.length); expanded[0] = true; cache = new Array(G.length); levelDom = []; render(); fit();
    });
    document.body.setAttribute('data-ready', '1');
  }

  // A test/bench hook: expand or fold group `path` and return the time taken.
  window.fxcppExplorer = {
    toggle: function (path) {
      for (var g = 0; g < G.length; g++) if (G[g].path === path) { var t0 = performance.now(); toggle(g); return performance.now() - t0; }
      return -1;
    },
    groupPaths: function () { return G.map(function (g) { return g.path; }); },
    groupParents: function () { return G.map(function (g) { return g.parent; }); },
    // Expand or fold group id g; calls done(ms) once the next frame is drawn
    // (the time the bench reports for a click).
    toggleTimed: function (g, done) {
      var t0 = performance.now();
      toggle(g);
      requestAnimationFrame(function () { setTimeout(function () { done(performance.now() - t0); }, 0); });
    },
    isOpen: function (g) { return !!expanded[g]; },
    foldAll: function () { $('foldbtn').click(); },
    timings: timings
  };

  window.addEventListener('error', function (ev) { fail('fxcpp explorer error: ' + ev.message); });
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
