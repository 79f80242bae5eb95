(function () {
  var svg = document.documentElement, frames = [], W = 0, pad = 10;
  var details, matched, unzoom, searchBtn, searching = false;
  // The frame's name: the title up to its value, without the mark an
  // inlined frame's title has (its label, drawn by offcpu, has none).
  function name(g) { var t = g.querySelector('title').textContent;
    return t.substring(0, t.lastIndexOf(' (')).replace(/ \[inlined\]$/, ''); }
  function init() {
    details = document.getElementById('details');
    matched = document.getElementById('matched');
    unzoom = document.getElementById('unzoom');
    searchBtn = document.getElementById('search');
    W = parseFloat(svg.getAttribute('width')) - 2 * pad;
    var gs = document.querySelectorAll('g.f');
    for (var i = 0; i < gs.length; i++) {
      var g = gs[i], r = g.querySelector('rect');
      frames.push({ g: g, r: r, t: g.querySelector('text'), o: +g.dataset.o,
                    v: +g.dataset.v, d: +g.dataset.d, fill: r.getAttribute('fill'),
                    name: name(g) });
      g.addEventListener('click', zoomTo.bind(null, frames[frames.length - 1]));
      g.addEventListener('mouseover', show.bind(null, g));
      g.addEventListener('mouseout', function () { details.textContent = ' '; });
    }
    unzoom.addEventListener('click', reset);
    searchBtn.addEventListener('click', function () {
      if (searching) { search(''); return; }
      var term = prompt('Search for (regular expression):', '');
      if (term) search(term);
    });
    window.addEventListener('keydown', function (e) {
      if ((e.ctrlKey || e.metaKey) && e.key === 'f') {
        e.preventDefault();
        var term = prompt('Search for (regular expression):', '');
        if (term) search(term);
      }
      if (e.key === 'Escape') { reset(); search(''); }
    });
    fit();
    window.addEventListener('resize', fit);
    window.addEventListener('wheel', function (e) {
      if (view < H) { e.preventDefault(); slide(top + e.deltaY); }
    }, { passive: false });
    window.addEventListener('keydown', function (e) {
      var step = { ArrowDown: 40, ArrowUp: -40, PageDown: view - 60,
                   PageUp: 60 - view, End: H, Home: -H }[e.key];
      if (step !== undefined && view < H) { e.preventDefault(); slide(top + step); }
    });
    var params = new URLSearchParams(document.location.search);
    if (params.get('x') !== null) { var f = frames[+params.get('x')]; if (f) zoomTo(f); }
    if (params.get('s')) search(params.get('s'));
  }
  // A graph taller than the window shows a window-high slice, opening at
  // the root where the wide frames are (not at the tips of the tallest
  // towers); wheel and keys move it, title and details stay in view.
  var H = 0, view = 0, top = 0, opened = false;
  function slide(t) {
    top = Math.max(0, Math.min(H - view, t));
    svg.setAttribute('viewBox', '0 ' + top + ' ' + svg.getAttribute('width') + ' ' + view);
    document.getElementById('head').setAttribute('transform', 'translate(0,' + top + ')');
    document.getElementById('foot').setAttribute('transform', 'translate(0,' + (top + view - H) + ')');
  }
  function fit() {
    H = H || parseFloat(svg.getAttribute('height'));
    view = Math.min(H, window.innerHeight || H);
    svg.setAttribute('height', view);
    slide(opened ? top : H);
    opened = true;
  }
  function show(g) { details.textContent = g.querySelector('title').textContent; }
  function fitText(f, w) {
    var chars = Math.floor((w - 6) / (12 * 0.59));
    f.t.textContent = chars < 3 ? '' : (f.name.length <= chars ? f.name : f.name.substring(0, chars - 2) + '..');
  }
  function place(f, x, w) {
    f.r.setAttribute('x', x); f.r.setAttribute('width', w);
    f.t.setAttribute('x', x + 3); fitText(f, w);
  }
  function zoomTo(z) {
    unzoom.classList.remove('hide');
    var k = W / z.v;
    frames.forEach(function (f) {
      var inside = f.o >= z.o - 1e-9 && f.o + f.v <= z.o + z.v + 1e-9 && f.d >= z.d;
      var below = f.d < z.d && f.o <= z.o + 1e-9 && f.o + f.v >= z.o + z.v - 1e-9;
      f.g.classList.toggle('hide', !inside && !below);
      f.g.classList.toggle('parent', below);
      if (inside) place(f, pad + (f.o - z.o) * k, f.v * k);
      else if (below) place(f, pad, W);
    });
  }
  function reset() {
    unzoom.classList.add('hide');
    var total = 0; frames.forEach(function (f) { if (f.d === 0) total += f.v; });
    var k = W / total;
    frames.forEach(function (f) {
      f.g.classList.remove('hide'); f.g.classList.remove('parent');
      place(f, pad + f.o * k, f.v * k);
    });
  }
  function search(term) {
    var re = null;
    try { re = term ? new RegExp(term) : null; } catch (e) { re = null; }
    var total = 0, spans = [];
    frames.forEach(function (f) {
      if (f.d === 0) total += f.v;
      var hit = re !== null && re.test(f.name);
      f.r.setAttribute('fill', hit ? 'rgb(230,0,230)' : f.fill);
      f.g.classList.toggle('match', hit);
      if (hit) spans.push([f.o, f.o + f.v]);
    });
    // Matched share without counting nested matches twice.
    spans.sort(function (a, b) { return a[0] - b[0]; });
    var covered = 0, end = -Infinity;
    spans.forEach(function (s) {
      if (s[0] >= end) { covered += s[1] - s[0]; end = s[1]; }
      else if (s[1] > end) { covered += s[1] - end; end = s[1]; }
    });
    matched.textContent = re ? 'Matched: ' + (100 * covered / total).toFixed(1) + '%' : ' ';
    searching = re !== null;
    searchBtn.textContent = searching ? 'Reset Search' : 'Search';
  }
  window.addEventListener('load', init);
})();
