// tokengeo view: the explorer's own canvas and SVG code (no library, no network).
// Three pages share it: "heads" (attention P, I - P, head-output similarity S per layer x head),
// "flow" (tokens on the sphere over time with E(t), G^2(t)) and "run" (a reproduce report).
"use strict";
(function () {
  const DATA = JSON.parse(document.getElementById("tg-data").textContent);
  const TG = (window.TG = { data: DATA, state: {}, timings: {}, panels: {}, ready: false });
  const app = document.getElementById("app");

  // ---------- small helpers ----------
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") e.className = v;
      else if (k === "text") e.textContent = v;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v);
    }
    for (const k of kids) if (k != null) e.append(k);
    return e;
  }
  function b64bytes(b64) {
    const s = atob(b64);
    const u = new Uint8Array(s.length);
    for (let i = 0; i < s.length; i++) u[i] = s.charCodeAt(i);
    return u;
  }
  async function inflate(b64) {
    const stream = new Blob([b64bytes(b64)]).stream().pipeThrough(new DecompressionStream("deflate"));
    return new Uint8Array(await new Response(stream).arrayBuffer());
  }
  function fmt(v) {
    if (!isFinite(v)) return String(v);
    const a = Math.abs(v);
    if (a === 0) return "0";
    if (a >= 1e4 || a < 1e-3) return v.toExponential(2);
    return v.toPrecision(3);
  }
  function showTok(s) {
    return s.replace(/\n/g, "⏎").replace(/\t/g, "⇥").replace(/ /g, "␣") || "∅";
  }
  function escapeXml(s) {
    return s.replace(/[<>&"']/g, (c) => ({ "<": "&lt;", ">": "&gt;", "&": "&amp;", '"': "&quot;", "'": "&apos;" }[c]));
  }
  function download(name, blob) {
    const a = el("a", { href: URL.createObjectURL(blob), download: name });
    document.body.append(a);
    a.click();
    setTimeout(() => { URL.revokeObjectURL(a.href); a.remove(); }, 1000);
  }
  function dataUrlBlob(url) {
    const [head, b64] = url.split(",");
    return new Blob([b64bytes(b64)], { type: head.slice(5, head.indexOf(";")) });
  }

  // ---------- colour maps (256-entry RGB tables) ----------
  const VIRIDIS = ["#440154", "#482475", "#414487", "#355f8d", "#2a788e", "#21918c", "#22a884",
    "#44bf70", "#7ad151", "#bddf26", "#fde725"];
  const RDBU = ["#053061", "#2166ac", "#4393c3", "#92c5de", "#d1e5f0", "#f7f7f7", "#fddbc7",
    "#f4a582", "#d6604d", "#b2182b", "#67001f"];
  function lut(stops) {
    const rgb = stops.map((h) => [1, 3, 5].map((i) => parseInt(h.slice(i, i + 2), 16)));
    const out = new Uint8Array(256 * 3);
    for (let k = 0; k < 256; k++) {
      const x = (k / 255) * (rgb.length - 1), i = Math.min(Math.floor(x), rgb.length - 2), f = x - i;
      for (let c = 0; c < 3; c++) out[3 * k + c] = Math.round(rgb[i][c] * (1 - f) + rgb[i + 1][c] * f);
    }
    return out;
  }
  const MAPS = { seq: lut(VIRIDIS), div: lut(RDBU) };
  // colour of a value: seq on [0, lim], div on [-lim, lim] (centred at 0: white)
  function colourIndex(v, lim, diverging) {
    const x = diverging ? 0.5 + v / (2 * lim) : v / lim;
    return Math.max(0, Math.min(255, Math.round(x * 255)));
  }
  // a Uint32 RGBA table from a code's value (256 codes) under a scale
  function codeTable(valueOf, lim, diverging) {
    const t = new Uint32Array(256), m = diverging ? MAPS.div : MAPS.seq;
    for (let c = 0; c < 256; c++) {
      const k = colourIndex(valueOf(c), lim || 1, diverging);
      t[c] = (255 << 24) | (m[3 * k + 2] << 16) | (m[3 * k + 1] << 8) | m[3 * k];
    }
    return t;
  }
  function barCanvas(diverging, w, h) {
    const c = el("canvas", { width: 256, height: 1 });
    const ctx = c.getContext("2d"), img = ctx.createImageData(256, 1), m = diverging ? MAPS.div : MAPS.seq;
    for (let k = 0; k < 256; k++) { img.data.set([m[3 * k], m[3 * k + 1], m[3 * k + 2], 255], 4 * k); }
    ctx.putImageData(img, 0, 0);
    if (w) { c.style.width = w + "px"; c.style.height = h + "px"; }
    return c;
  }
  // a masked cell of P (weight exactly 0: a causal or padding mask): light grey, never a colour
  // of the scale, so that it cannot be read as a small weight
  const MASKED = (255 << 24) | (0xe4 << 16) | (0xe4 << 8) | 0xe4;
  function hexOf(m, k) {
    return "#" + [0, 1, 2].map((c) => m[3 * k + c].toString(16).padStart(2, "0")).join("");
  }

  // =====================================================================================
  // heads page
  // =====================================================================================
  const KINDS = {
    P: { title: "Attention P", diverging: false },
    L: { title: "I − P (Laplacian operator)", diverging: true },
    S: { title: "Head-output similarity S", diverging: true },
  };

  function headsPage() {
    const D = DATA, T = D.T, tokens = D.tokens;
    const st = Object.assign(TG.state, { l: 0, h: 0, hover: null, scale: "max", size: 400 });
    const cache = new Map();

    // matrix side in CSS pixels: two panels side by side in the main column
    function panelSize() {
      const m = document.getElementById("main"), w = m ? m.clientWidth : 900;
      return Math.max(220, Math.min(640, Math.floor((w - 14) / 2) - 74 - 20));
    }
    function head(l, h) { return D.heads[l * D.H + h]; }

    // ----- data of one head: codes of P and S (T*T each) -----
    function chunkText(key) {
      if (D.chunks === "inline") return Promise.resolve(document.getElementById("tg-chunk-" + key).textContent);
      return new Promise((resolve, reject) => {
        const waiting = (TG._waiting = TG._waiting || {});
        waiting[key] = resolve;
        const s = el("script", { src: D.chunks + "/c-" + key + ".js" });
        s.onerror = () => reject(new Error("missing data file " + D.chunks + "/c-" + key + ".js"));
        document.body.append(s);
      });
    }
    window.TG_CHUNK = (key, data) => { const w = TG._waiting[key]; delete TG._waiting[key]; if (w) w(data); };
    async function load(l, h) {
      const key = l + "-" + h;
      if (!cache.has(key)) {
        cache.set(key, chunkText(key).then(inflate).then((u) => ({ P: u.subarray(0, T * T), S: u.subarray(T * T) })));
        if (cache.size > 24) cache.delete(cache.keys().next().value);
      }
      return cache.get(key);
    }

    // ----- values and scales -----
    // decades of the head's log scale (fitted per head; 0: linear)
    function decOf(hd) { return D.p_log ? (hd.p_log || D.p_log) : 0; }
    function valueFns(hd) {
      const ps = hd.p_scale, ss = hd.s_scale;
      // P codes: linear (c / 255 of max P) or, with the head's decades, log (encode.quantise_log)
      const dl = decOf(hd);
      const pv = dl ? (c) => (c === 0 ? 0 : ps * Math.pow(10, dl * ((c - 1) / 254 - 1)))
        : (c) => (c / 255) * ps;
      return {
        P: pv,
        Loff: (c) => -pv(c),
        Ldiag: (c) => 1 - pv(c),
        S: (c) => ((c - 128) / 127) * ss,
      };
    }
    // per-row scales ("row") or excluded key tokens (exact weights in hd.p_excluded)
    const ROW = D.colour === "row", EXCL = D.p_exclude || [];
    const exact = ROW || EXCL.length > 0;
    // the weights P (T*T) of a head: codes times the head's or row's scale, excluded columns exact
    function pValues(codes, hd) {
      if (codes.Pv) return codes.Pv;
      const f = valueFns(hd), v = new Float32Array(T * T);
      for (let i = 0; i < T; i++) {
        const rs = ROW ? hd.p_rows[i] / 255 : 0;
        for (let j = 0; j < T; j++) { const c = codes.P[i * T + j]; v[i * T + j] = ROW ? c * rs : f.P(c); }
      }
      EXCL.forEach((j, n) => { for (let i = 0; i < T; i++) v[i * T + j] = hd.p_excluded[n][i]; });
      codes.Pv = v;
      return v;
    }
    function value(kind, codes, hd, i, j) {
      const f = valueFns(hd);
      if (kind === "S") return f.S(codes.S[i * T + j]);
      const pv = exact ? pValues(codes, hd)[i * T + j] : f.P(codes.P[i * T + j]);
      if (kind === "P") return pv;
      return (i === j ? 1 : 0) - pv;
    }
    // I - P from exact weights: its largest |value| (or 99th percentile) and its image
    function exactL(codes, hd) {
      const v = pValues(codes, hd), a = new Float32Array(T * T);
      for (let k = 0; k < T * T; k++) a[k] = Math.abs((k % (T + 1) === 0 ? 1 : 0) - v[k]);
      const sorted = a.slice().sort();
      const lim = st.scale === "p99" ? sorted[Math.min(T * T - 1, Math.floor(0.99 * T * T))] : sorted[T * T - 1];
      return lim > 0 ? lim : 1;
    }
    // colour limit: the largest |value| ("max") or its 99th percentile ("p99"), exact on codes
    function limit(kind, codes, hd) {
      if (kind === "P" && ROW) return 1; // each row against its own max: codes are the fraction
      if (kind === "L" && exact) return exactL(codes, hd);
      const f = valueFns(hd), arr = kind === "S" ? codes.S : codes.P;
      const hist = new Float64Array(256);
      let diagMax = 0;
      if (kind === "L") {
        for (let i = 0; i < T; i++) diagMax = Math.max(diagMax, Math.abs(f.Ldiag(arr[i * T + i])));
        for (let i = 0; i < T; i++) hist[arr[i * T + i]] -= 1;
      }
      for (let k = 0; k < arr.length; k++) hist[arr[k]] += 1;
      const absOf = kind === "S" ? (c) => Math.abs(f.S(c)) : (c) => f.P(c);
      const order = [...Array(256).keys()].sort((a, b) => absOf(a) - absOf(b));
      let total = 0;
      for (const c of order) total += hist[c];
      let top = 0;
      for (const c of order) if (hist[c] > 0) top = absOf(c);
      let lim = top;
      if (st.scale === "p99") {
        let acc = 0;
        for (const c of order) { acc += hist[c]; if (acc >= 0.99 * total) { lim = absOf(c); break; } }
      }
      if (kind === "L") lim = st.scale === "p99" ? lim : Math.max(lim, diagMax);
      return lim > 0 ? lim : 1;
    }
    // log colour scale of P: 0 at lim 10^-decades (and below), 1 at lim
    function logPosition(v, lim, dl) {
      return v <= 0 ? 0 : Math.max(0, Math.min(1, 1 + Math.log10(v / lim) / dl));
    }
    function rgbaImage(kind, codes, hd, lim) {
      const f = valueFns(hd), dv = KINDS[kind].diverging;
      const img = new ImageData(T, T), px = new Uint32Array(img.data.buffer);
      if (kind === "P" && ROW) {
        const t = codeTable((c) => c / 255, 1, false);
        for (let k = 0; k < T * T; k++) px[k] = t[codes.P[k]];
      }
      else if (kind === "L" && exact) {
        const v = pValues(codes, hd), m = MAPS.div;
        for (let k = 0; k < T * T; k++) {
          const c = colourIndex((k % (T + 1) === 0 ? 1 : 0) - v[k], lim, true);
          px[k] = (255 << 24) | (m[3 * c + 2] << 16) | (m[3 * c + 1] << 8) | m[3 * c];
        }
      }
      else if (kind === "P") {
        const t = D.p_log ? codeTable((c) => logPosition(f.P(c), lim, decOf(hd)), 1, false) : codeTable(f.P, lim, false);
        for (let k = 0; k < T * T; k++) px[k] = t[codes.P[k]];
      }
      else if (kind === "S") { const t = codeTable(f.S, lim, true); for (let k = 0; k < T * T; k++) px[k] = t[codes.S[k]]; }
      else {
        const off = codeTable(f.Loff, lim, dv), diag = codeTable(f.Ldiag, lim, dv);
        for (let k = 0; k < T * T; k++) px[k] = off[codes.P[k]];
        for (let i = 0; i < T; i++) px[i * T + i] = diag[codes.P[i * T + i]];
      }
      if (kind !== "S") { // code 0 is kept for weights exactly 0 (masked)
        for (let k = 0; k < T * T; k++) if (codes.P[k] === 0 && k % (T + 1) !== 0) px[k] = MASKED;
      }
      return img;
    }

    // ----- layout -----
    const hdr = el("header", {},
      el("h1", { text: "tokengeo view — " + (D.model || "model") }),
      el("div", { class: "meta", text: `${T} tokens · ${D.L} layers × ${D.H} heads · ` +
        `${D.heads.filter((x) => x.kind !== "attention").length} Laplacian/mixed heads (red frame)` +
        (D.source ? " · " + D.source : "") }),
      el("div", { class: "meta" }, "Keys: ", el("kbd", { text: "←" }), el("kbd", { text: "→" }), " head, ",
        el("kbd", { text: "↑" }), el("kbd", { text: "↓" }), " layer, ", el("kbd", { text: "s" }),
        " colour limit max / 99th percentile, ", el("kbd", { text: "Esc" }), " clear hover."));
    const side = el("div", { id: "side" });
    const title = el("h2", { style: "font-size:15px;margin:0 0 6px" });
    const scaleBtn = el("button", { onclick: () => setScale(st.scale === "max" ? "p99" : "max") });
    const panelsEl = el("div", { class: "panels" });
    const info = el("div", { id: "info" });
    const strip = el("div", { id: "tokens" });
    const tokKind = el("button", { onclick: () => { st.tokKind = st.tokKind === "P" ? "S" : "P"; colourTokens(); } });
    const tokHead = el("div", { class: "muted", id: "tokhead" });
    st.tokKind = "P";
    const main = el("div", { id: "main" }, title, el("div", { class: "controls" }, scaleBtn), panelsEl, info,
      el("div", { class: "controls" }, tokKind, tokHead), strip);
    app.replaceChildren(hdr, el("div", { id: "layout" }, side, main));

    // thumbnails: L rows x H columns, P of each head scaled to its own maximum (max-pooled)
    const grid = el("div", { class: "grid", style: `grid-template-columns: 22px repeat(${D.H}, 40px)` });
    grid.append(el("span", { class: "lab", text: "L\\H" }));
    for (let h = 0; h < D.H; h++) grid.append(el("span", { class: "lab", text: String(h) }));
    TG.thumbs = [];
    const tsz = D.thumbs.size;
    inflate(D.thumbs.data).then((u) => {
      for (let l = 0; l < D.L; l++) {
        grid.append(el("span", { class: "lab", text: String(l) }));
        for (let h = 0; h < D.H; h++) {
          const c = el("canvas", { width: tsz, height: tsz, class: "thumb " + head(l, h).kind,
            title: `layer ${l}, head ${h} (${head(l, h).kind})`, "data-l": l, "data-h": h });
          const img = new ImageData(tsz, tsz), px = new Uint32Array(img.data.buffer);
          const t = codeTable((q) => q / 255, 1, false), base = (l * D.H + h) * tsz * tsz;
          for (let k = 0; k < tsz * tsz; k++) px[k] = t[u[base + k]];
          c.getContext("2d").putImageData(img, 0, 0);
          c.addEventListener("click", () => select(l, h));
          grid.append(c);
          TG.thumbs.push(c);
        }
      }
      markSelected();
    });
    side.append(el("div", { class: "muted", style: "margin-bottom:4px", text: (ROW ? "P per query row (own max)" : "P per head (own max" + (D.p_log ? ", log)" : ")")) +
      (EXCL.length ? " without key token" + (EXCL.length > 1 ? "s " : " ") + EXCL.join(", ") : "") }), grid);
    st.size = panelSize(); // now that the thumbnail column has its width

    // token strip: hover a token to highlight its row and column
    TG.tokenSpans = tokens.map((t, i) => {
      const s = el("span", { text: showTok(t), title: `token ${i}` });
      s.addEventListener("mouseenter", () => setHover({ i, j: i, from: "token" }));
      strip.append(s);
      return s;
    });

    // ----- panels -----
    function makePanel(kind) {
      const M = st.size, margin = 74;
      const base = el("canvas", { class: "base", width: M + margin, height: M + margin });
      const over = el("canvas", { width: M + margin, height: M + margin });
      const scale = el("div", { class: "scale" });
      const bar = el("div", { class: "bar" });
      const p = { kind, M, margin, base, over, scale, bar };
      const box = el("div", { class: "panel", "data-kind": kind, style: `width:${M + margin + 18}px` },
        el("h2", { text: KINDS[kind].title }), scale, el("div", { class: "stack" }, base, over), bar,
        el("div", { class: "tools" },
          el("button", { text: "PNG", onclick: () => exportPanel(kind, "png").then((r) => download(r.name, dataUrlBlob(r.data))) }),
          el("button", { text: "SVG", onclick: () => exportPanel(kind, "svg").then((r) => download(r.name, new Blob([r.data], { type: "image/svg+xml" }))) })));
      p.box = box;
      over.addEventListener("mousemove", (ev) => {
        const r = over.getBoundingClientRect();
        const x = ev.clientX - r.left - margin, y = ev.clientY - r.top - margin;
        if (x < 0 || y < 0 || x >= M || y >= M) return;
        setHover({ i: Math.floor((y / M) * T), j: Math.floor((x / M) * T), from: kind });
      });
      return p;
    }
    function drawLabels(ctx, M, margin, hi) {
      const cell = M / T, step = Math.max(1, Math.ceil(11 / cell));
      ctx.font = "10px ui-monospace, monospace";
      ctx.fillStyle = "#333";
      for (let i = 0; i < T; i += step) drawLabel(ctx, i, cell, margin, false);
      if (hi) { for (const i of new Set([hi.i, hi.j])) drawLabel(ctx, i, cell, margin, true); }
    }
    function drawLabel(ctx, i, cell, margin, bold) {
      const t = showTok(tokens[i]).slice(0, 9), y = margin + (i + 0.5) * cell;
      ctx.save();
      ctx.font = (bold ? "bold " : "") + "10px ui-monospace, monospace";
      ctx.textAlign = "right"; ctx.textBaseline = "middle";
      if (bold) { ctx.fillStyle = "#ffd54f"; ctx.fillRect(0, y - 6, margin - 3, 12); ctx.fillStyle = "#000"; }
      ctx.fillText(t, margin - 4, y);
      ctx.translate(margin + (i + 0.5) * cell, margin - 4);
      ctx.rotate(-Math.PI / 2);
      ctx.textAlign = "left";
      if (bold) { ctx.fillStyle = "#ffd54f"; ctx.fillRect(-1, -6, margin - 5, 12); ctx.fillStyle = "#000"; }
      ctx.fillText(t, 0, 0);
      ctx.restore();
    }
    function scaleText(kind, lim, hd) {
      const how = st.scale === "max" ? "largest |value| of this head" : "99th percentile of |value| (beyond: clipped)";
      const without = EXCL.length ? ` without key token${EXCL.length > 1 ? "s" : ""} ${EXCL.join(", ")}, clipped above` : "";
      const top = (st.scale === "max" ? "max P of this head" : "99th percentile of P") + without;
      if (kind === "P" && ROW) return `linear per query row i, 0 … each row's max P${without}`;
      if (kind === "P" && D.p_log) return `log, ${fmt(lim * Math.pow(10, -decOf(hd)))} … ${fmt(lim)} (${decOf(hd)} decades below the ${top})`;
      if (kind === "P") return `linear, 0 … ${fmt(lim)} (${top})`;
      return `diverging, centred at 0: −${fmt(lim)} … 0 … +${fmt(lim)} (${how})`;
    }
    function drawPanel(p, codes, hd) {
      const t0 = performance.now();
      const lim = limit(p.kind, codes, hd);
      const img = rgbaImage(p.kind, codes, hd, lim);
      const off = el("canvas", { width: T, height: T });
      off.getContext("2d").putImageData(img, 0, 0);
      const ctx = p.base.getContext("2d");
      ctx.clearRect(0, 0, p.base.width, p.base.height);
      ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, p.base.width, p.base.height);
      ctx.imageSmoothingEnabled = T > p.M; // downsampling averages; upsampling keeps cells square
      ctx.imageSmoothingQuality = "high";
      ctx.drawImage(off, p.margin, p.margin, p.M, p.M);
      ctx.strokeStyle = "#999"; ctx.strokeRect(p.margin - 0.5, p.margin - 0.5, p.M + 1, p.M + 1);
      drawLabels(ctx, p.M, p.margin, null);
      Object.assign(p, { lim, img, off, codes, hd });
      p.scale.textContent = "rows: query token i, columns: token j · colour " + scaleText(p.kind, lim, hd) +
        (p.kind !== "S" ? " · grey: masked (P exactly 0)" : "");
      const dv = KINDS[p.kind].diverging;
      const low = dv ? "−" + fmt(lim) : p.kind === "P" && D.p_log ? fmt(lim * Math.pow(10, -decOf(hd))) : "0";
      p.bar.replaceChildren(el("span", { text: low }), barCanvas(dv, 180, 10),
        el("span", { text: p.kind === "P" && ROW ? "row max" : (dv ? "+" : "") + fmt(lim) }));
      TG.timings["draw_" + p.kind] = performance.now() - t0;
    }
    function drawOverlay(p) {
      const ctx = p.over.getContext("2d"), hv = st.hover, cell = p.M / T;
      ctx.clearRect(0, 0, p.over.width, p.over.height);
      if (!hv) return;
      const w = Math.max(cell, 1.5);
      ctx.fillStyle = "rgba(255, 213, 79, 0.35)";
      ctx.fillRect(p.margin, p.margin + hv.i * cell, p.M, w);
      ctx.fillRect(p.margin + hv.j * cell, p.margin, w, p.M);
      ctx.strokeStyle = "#e53935"; ctx.lineWidth = 2;
      ctx.strokeRect(p.margin + hv.j * cell - 1, p.margin + hv.i * cell - 1, w + 2, w + 2);
      drawLabel(ctx, hv.i, cell, p.margin, true);
      if (hv.j !== hv.i) drawLabel(ctx, hv.j, cell, p.margin, true);
    }
    function kindsOf(hd) { return hd.kind === "attention" ? ["P", "S"] : ["P", "L", "S"]; }

    async function render() {
      const t0 = performance.now();
      const { l, h } = st, hd = head(l, h);
      title.textContent = `Layer ${l}, head ${h} — ${hd.kind} head` +
        (hd.kind === "attention" ? "" : ": its output is (I − P)V" + (hd.kind === "mixed" ? " mixed with PV" : ""));
      scaleBtn.textContent = "colour limit: " + (st.scale === "max" ? "max |value|" : "99th percentile");
      const codes = await load(l, h);
      if (st.l !== l || st.h !== h) return; // a newer selection is on its way
      const want = kindsOf(hd);
      if (Object.keys(TG.panels).join() !== want.join() || st.resized) {
        TG.panels = {};
        panelsEl.replaceChildren(...want.map((k) => { const p = makePanel(k); TG.panels[k] = p; return p.box; }));
        st.resized = false;
      }
      for (const k of want) { drawPanel(TG.panels[k], codes, hd); drawOverlay(TG.panels[k]); }
      updateInfo();
      colourTokens();
      TG.timings.render = performance.now() - t0;
      TG.ready = true;
      document.body.dataset.ready = `${l}-${h}`;
      load(l, (h + 1) % D.H); // prefetch the next head
    }
    // the text coloured by one row of the selected head (as CircuitsVis' coloured tokens): token
    // j takes the colour of cell (i, j) of the P or S panel, i the hovered token (or the last)
    function colourTokens() {
      const p = TG.panels[st.tokKind];
      tokKind.textContent = "tokens coloured by: " + (st.tokKind === "P" ? "attention P" : "similarity S");
      if (!p || !p.img) return;
      const i = st.hover ? st.hover.i : T - 1, px = p.img.data;
      tokHead.textContent = `row ${i} “${showTok(tokens[i])}”: ` + (st.tokKind === "P"
        ? "how much it attends to each token" : "how alike its head output is to each token's") +
        " (hover a token or a cell to change the row)";
      TG.tokenSpans.forEach((s, j) => {
        const k = 4 * (i * T + j), [r, g, b] = [px[k], px[k + 1], px[k + 2]];
        s.style.background = `rgb(${r},${g},${b})`;
        s.style.color = 0.299 * r + 0.587 * g + 0.114 * b < 128 ? "#fff" : "#000";
        s.classList.toggle("row", j === i);
      });
      TG.tokenColours = TG.tokenSpans.map((s) => s.style.background);
    }
    function markSelected() {
      for (const c of TG.thumbs) c.classList.toggle("selected", +c.dataset.l === st.l && +c.dataset.h === st.h);
    }
    function select(l, h) {
      st.l = (l + D.L) % D.L; st.h = (h + D.H) % D.H;
      markSelected();
      TG.lastRender = render();
      return TG.lastRender;
    }
    function setScale(s) { st.scale = s; TG.lastRender = render(); return TG.lastRender; }
    function setHover(hv) {
      st.hover = hv;
      for (const p of Object.values(TG.panels)) drawOverlay(p);
      TG.tokenSpans.forEach((s, k) => s.classList.toggle("hl", !!hv && (k === hv.i || k === hv.j)));
      updateInfo();
      colourTokens();
    }
    function topOfRow(arr, i, valueOf, n, abs) {
      const idx = [];
      for (let j = 0; j < T; j++) idx.push(j);
      const key = (j) => (abs ? Math.abs(valueOf(arr[i * T + j])) : valueOf(arr[i * T + j]));
      idx.sort((a, b) => key(b) - key(a));
      return idx.slice(0, n).map((j) => [j, valueOf(arr[i * T + j])]);
    }
    function topPairs(arr, valueOf, n) {
      // the n largest cells with i < j (S is symmetric): a code threshold from the histogram,
      // then one pass over the cells above it
      const hist = new Uint32Array(256);
      for (let k = 0; k < arr.length; k++) hist[arr[k]]++;
      let c = 255, count = 0;
      while (c > 0 && count < 2 * n + T) { count += hist[c]; if (count < 2 * n + T) c--; }
      const found = [];
      for (let i = 0; i < T; i++) for (let j = i + 1; j < T; j++) if (arr[i * T + j] >= c) found.push([i, j, valueOf(arr[i * T + j])]);
      found.sort((x, y) => y[2] - x[2]);
      return found.slice(0, n);
    }
    function updateInfo() {
      const p = TG.panels.P;
      if (!p || !p.codes) return;
      const codes = p.codes, hd = p.hd, f = valueFns(hd), hv = st.hover;
      const tok = (k) => `${k} “${showTok(tokens[k])}”`;
      if (!hv) {
        const pairs = topPairs(codes.S, f.S, 6);
        info.replaceChildren(el("b", { text: "Hover a cell or a token. " }),
          el("span", { text: "Most similar head outputs (top S pairs): " +
            pairs.map(([i, j, v]) => `${tok(i)}–${tok(j)} ${fmt(v)}`).join("; ") }));
        return;
      }
      const { i, j } = hv;
      const cells = Object.keys(TG.panels).map((k) => `${k === "L" ? "(I−P)" : k}=${fmt(value(k, codes, hd, i, j))}`);
      const row = el("table", {},
        el("tr", {}, el("th", { text: `top P of row ${i} (what ${tok(i)} attends to)` }),
          el("th", { text: `top |S| of row ${i} (outputs most like ${tok(i)}'s)` })),
        ...topOfRow(codes.P, i, f.P, 5, false).map(([a, va], r) => {
          const [b, vb] = topOfRow(codes.S, i, f.S, 5, true)[r];
          return el("tr", {}, el("td", { text: `${tok(a)}: ${fmt(va)}` }), el("td", { text: `${tok(b)}: ${fmt(vb)}` }));
        }));
      info.replaceChildren(el("div", { text: `row ${tok(i)}, column ${tok(j)}: ${cells.join(", ")}` }), row);
    }

    // ----- export at publication size -----
    function exportPanel(kind, format) {
      const p = TG.panels[kind];
      if (!p) return Promise.reject(new Error("no panel " + kind));
      const k = Math.max(1, Math.ceil(1600 / T)), side = T * k, font = 22, margin = 200, top = 90;
      const W = margin + side + 40, H = top + margin + side + 130;
      const name = `tokengeo-l${st.l}-h${st.h}-${kind}.${format}`;
      const showEvery = Math.max(1, Math.ceil((font * 1.1) / k));
      const ticks = [];
      for (let i = 0; i < T; i += showEvery) ticks.push(i);
      const heading = `${KINDS[kind].title} — layer ${st.l}, head ${st.h} (${p.hd.kind}), ${D.model || ""}`;
      const legend = "colour " + scaleText(kind, p.lim, p.hd);
      const dv = KINDS[kind].diverging;
      if (format === "png") {
        const c = el("canvas", { width: W, height: H }), ctx = c.getContext("2d");
        ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, W, H);
        ctx.imageSmoothingEnabled = false;
        ctx.drawImage(p.off, margin, top + margin, side, side);
        ctx.fillStyle = "#000"; ctx.font = `bold ${font}px sans-serif`; ctx.fillText(heading, 10, 36);
        ctx.font = `${font - 4}px sans-serif`; ctx.fillText(legend, 10, 68);
        ctx.font = `${font - 6}px monospace`;
        for (const i of ticks) {
          const t = showTok(tokens[i]).slice(0, 12), y = top + margin + (i + 0.5) * k;
          ctx.textAlign = "right"; ctx.textBaseline = "middle"; ctx.fillText(t, margin - 6, y);
          ctx.save(); ctx.translate(margin + (i + 0.5) * k, top + margin - 6); ctx.rotate(-Math.PI / 2);
          ctx.textAlign = "left"; ctx.fillText(t, 0, 0); ctx.restore();
        }
        ctx.textAlign = "left"; ctx.textBaseline = "alphabetic";
        const by = top + margin + side + 40;
        ctx.drawImage(barCanvas(dv), margin, by, Math.min(600, side), 24);
        ctx.font = `${font - 4}px sans-serif`;
        ctx.fillText(dv ? "−" + fmt(p.lim) : "0", margin, by + 52);
        ctx.textAlign = "right"; ctx.fillText((dv ? "+" : "") + fmt(p.lim), margin + Math.min(600, side), by + 52);
        return Promise.resolve({ name, data: c.toDataURL("image/png"), width: W, height: H });
      }
      // SVG: the matrix as an embedded image (T x T pixels, drawn without smoothing), the
      // labels, title, scale and colour bar as vector text and shapes
      const m = dv ? MAPS.div : MAPS.seq, bw = Math.min(600, side), by = top + margin + side + 40;
      const stops = [...Array(11).keys()].map((s) => `<stop offset="${s / 10}" stop-color="${hexOf(m, Math.round((s / 10) * 255))}"/>`).join("");
      const labels = ticks.map((i) => {
        const t = escapeXml(showTok(tokens[i]).slice(0, 12)), y = top + margin + (i + 0.5) * k, x = margin + (i + 0.5) * k;
        return `<text x="${margin - 6}" y="${y}" text-anchor="end" dominant-baseline="middle">${t}</text>` +
          `<text transform="translate(${x},${top + margin - 6}) rotate(-90)" dominant-baseline="middle">${t}</text>`;
      }).join("");
      const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}">` +
        `<rect width="${W}" height="${H}" fill="#fff"/>` +
        `<text x="10" y="36" font-family="sans-serif" font-weight="bold" font-size="${font}">${escapeXml(heading)}</text>` +
        `<text x="10" y="68" font-family="sans-serif" font-size="${font - 4}">${escapeXml(legend)}</text>` +
        `<image x="${margin}" y="${top + margin}" width="${side}" height="${side}" preserveAspectRatio="none" ` +
        `style="image-rendering:pixelated" href="${p.off.toDataURL("image/png")}"/>` +
        `<g font-family="monospace" font-size="${font - 6}">${labels}</g>` +
        `<defs><linearGradient id="bar">${stops}</linearGradient></defs>` +
        `<rect x="${margin}" y="${by}" width="${bw}" height="24" fill="url(#bar)"/>` +
        `<g font-family="sans-serif" font-size="${font - 4}"><text x="${margin}" y="${by + 52}">${dv ? "−" + fmt(p.lim) : "0"}</text>` +
        `<text x="${margin + bw}" y="${by + 52}" text-anchor="end">${(dv ? "+" : "") + fmt(p.lim)}</text></g></svg>`;
      return Promise.resolve({ name, data: svg, width: W, height: H });
    }

    // ----- keyboard -----
    document.addEventListener("keydown", (ev) => {
      const moves = { ArrowLeft: [0, -1], ArrowRight: [0, 1], ArrowUp: [-1, 0], ArrowDown: [1, 0] };
      if (moves[ev.key]) {
        ev.preventDefault();
        let l = st.l + moves[ev.key][0], h = st.h + moves[ev.key][1];
        if (h < 0) { h = D.H - 1; l -= 1; } else if (h >= D.H) { h = 0; l += 1; }
        select(l, h);
      } else if (ev.key === "s") setScale(st.scale === "max" ? "p99" : "max");
      else if (ev.key === "Escape") setHover(null);
    });
    window.addEventListener("resize", () => {
      const s = panelSize();
      if (s !== st.size) { st.size = s; st.resized = true; render(); }
    });
    Object.assign(TG, { select, setHover, setScale, exportPanel, load, colourTokens, value: (k, i, j) => {
      const p = TG.panels[k]; return value(k, p.codes, p.hd, i, j); } });
    select(0, 0);
  }

  // =====================================================================================
  // flow page: tokens on the sphere over time, E(t) and G^2(t)
  // =====================================================================================
  function flowPage() {
    const D = DATA, n = D.n_tokens, R = D.t.length, P = D.n_paths;
    const st = Object.assign(TG.state, { r: R - 1, path: 0, rot: [0.4, -0.6], playing: false });
    let X = null; // Int16Array (P, R, n, 3)
    const S = 480;
    const canvas = el("canvas", { width: S, height: S, style: "cursor:grab;background:#fff;border:1px solid #d0d0d0" });
    const slider = el("input", { type: "range", min: 0, max: R - 1, value: R - 1, style: "width:360px" });
    const tLabel = el("span");
    const pathSel = el("select", {}, ...[...Array(P).keys()].map((p) => el("option", { value: p, text: "path " + p })));
    const play = el("button", { text: "▶ play" });
    const charts = el("div", { class: "charts" });
    app.replaceChildren(
      el("header", {}, el("h1", { text: `tokengeo view — flow ${D.preset.name || ""}, H = ${D.n_heads}` }),
        el("div", { class: "meta", text: `${n} tokens on S^${D.d - 1}, ${P} path(s), ${R} recorded times, T = ${D.t[R - 1]}` +
          (D.d > 3 ? " · shown: the first 3 coordinates" : "") + " · " + D.note }),
        el("div", { class: "meta" }, "Drag to rotate; ", el("kbd", { text: "←" }), el("kbd", { text: "→" }),
          " time step, ", el("kbd", { text: "space" }), " play / pause.")),
      el("div", { id: "layout" },
        el("div", { class: "panel", "data-kind": "sphere" }, el("h2", { text: "Tokens on the sphere" }),
          el("div", { class: "controls" }, play, slider, tLabel, pathSel), canvas,
          el("div", { class: "tools" },
            el("button", { text: "PNG", onclick: () => exportPanel("sphere", "png").then((r) => download(r.name, dataUrlBlob(r.data))) }),
            el("button", { text: "SVG", onclick: () => exportPanel("sphere", "svg").then((r) => download(r.name, new Blob([r.data], { type: "image/svg+xml" }))) }))),
        charts));

    function rotation() {
      const [a, b] = st.rot, ca = Math.cos(a), sa = Math.sin(a), cb = Math.cos(b), sb = Math.sin(b);
      // yaw a about z, then pitch b about x
      return [[ca, -sa, 0], [cb * sa, cb * ca, -sb], [sb * sa, sb * ca, cb]];
    }
    function projected() {
      const M = rotation(), out = [], base = (st.path * R + st.r) * n * 3;
      for (let k = 0; k < n; k++) {
        const x = [0, 1, 2].map((c) => X[base + 3 * k + c] / 32767);
        const v = M.map((row) => row[0] * x[0] + row[1] * x[1] + row[2] * x[2]);
        out.push({ k, x: v[0], y: v[1], z: v[2] });
      }
      return out.sort((a, b) => a.z - b.z);
    }
    function colourOf(k) { const c = Math.round((k / Math.max(1, n - 1)) * 255); return hexOf(MAPS.seq, c); }
    function draw() {
      const t0 = performance.now(), ctx = canvas.getContext("2d"), c = S / 2, rad = S * 0.42;
      ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, S, S);
      ctx.strokeStyle = "#bbb"; ctx.beginPath(); ctx.arc(c, c, rad, 0, 2 * Math.PI); ctx.stroke();
      for (const q of projected()) {
        ctx.globalAlpha = q.z < 0 ? 0.25 : 0.9;
        ctx.fillStyle = colourOf(q.k);
        ctx.beginPath(); ctx.arc(c + rad * q.x, c - rad * q.y, 3.2 + 1.2 * q.z, 0, 2 * Math.PI); ctx.fill();
      }
      ctx.globalAlpha = 1;
      tLabel.textContent = `t = ${fmt(D.t[st.r])}`;
      slider.value = st.r;
      for (const ch of chartEls) ch.cursor();
      TG.timings.draw_sphere = performance.now() - t0;
      document.body.dataset.ready = "flow-" + st.r;
    }
    // line chart of one series' mean over paths with a band of +- one standard deviation
    const chartEls = [];
    function chart(key, label, logY) {
      const W = 460, H = 200, L = 60, B = 34, series = D.series[key];
      const ys = series.mean.map((m, r) => [m - series.std[r], m + series.std[r], m]).flat().filter((v) => v != null && isFinite(v) && (!logY || v > 0));
      const box = el("div", { class: "chart panel", "data-kind": key });
      if (!ys.length) { box.append(el("h2", { text: label }), el("p", { class: "muted", text: "undefined for this run (non-symmetric heads)" })); charts.append(box); return; }
      let lo = Math.min(...ys), hi = Math.max(...ys);
      if (logY) { lo = Math.log10(lo); hi = Math.log10(hi); }
      if (hi === lo) { hi += 1; lo -= 1; }
      const tx = (r) => L + ((D.t[r] - D.t[0]) / (D.t[R - 1] - D.t[0] || 1)) * (W - L - 10);
      const ty = (v) => { const y = logY ? Math.log10(Math.max(v, 1e-300)) : v; return H - B - ((y - lo) / (hi - lo)) * (H - B - 10); };
      const line = series.mean.map((m, r) => `${r ? "L" : "M"}${tx(r).toFixed(1)},${ty(m).toFixed(1)}`).join("");
      const up = series.mean.map((m, r) => `${r ? "L" : "M"}${tx(r).toFixed(1)},${ty(m + series.std[r]).toFixed(1)}`).join("");
      const down = series.mean.map((m, r) => `L${tx(R - 1 - r).toFixed(1)},${ty(series.mean[R - 1 - r] - series.std[R - 1 - r]).toFixed(1)}`).join("");
      const tick = (v) => fmt(logY ? Math.pow(10, v) : v);
      const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="11">` +
        `<rect width="${W}" height="${H}" fill="#fff"/><clipPath id="clip-${key}"><rect x="${L}" y="10" width="${W - L - 10}" height="${H - B - 10}"/></clipPath>` +
        `<path d="${up}${down}Z" fill="#2a788e" opacity="0.2" clip-path="url(#clip-${key})"/>` +
        `<path d="${line}" fill="none" stroke="#2a788e" stroke-width="1.6"/>` +
        `<line x1="${L}" y1="${H - B}" x2="${W - 10}" y2="${H - B}" stroke="#444"/><line x1="${L}" y1="10" x2="${L}" y2="${H - B}" stroke="#444"/>` +
        `<text x="${L - 4}" y="14" text-anchor="end">${tick(hi)}</text><text x="${L - 4}" y="${H - B}" text-anchor="end">${tick(lo)}</text>` +
        `<text x="${L}" y="${H - B + 14}">${fmt(D.t[0])}</text><text x="${W - 10}" y="${H - B + 14}" text-anchor="end">${fmt(D.t[R - 1])}</text>` +
        `<text x="${(W + L) / 2}" y="${H - 4}" text-anchor="middle">t</text>` +
        `<line class="cursor" x1="0" y1="10" x2="0" y2="${H - B}" stroke="#e53935"/></svg>`;
      box.innerHTML = `<h2>${label}</h2><div class="scale">mean over ${P} path(s) ± one standard deviation${logY ? ", log scale" : ""}</div>` + svg;
      const cur = box.querySelector(".cursor");
      chartEls.push({ cursor: () => { cur.setAttribute("x1", tx(st.r)); cur.setAttribute("x2", tx(st.r)); } });
      box.append(el("div", { class: "tools" },
        el("button", { text: "SVG", onclick: () => exportPanel(key, "svg").then((r) => download(r.name, new Blob([r.data], { type: "image/svg+xml" }))) }),
        el("button", { text: "PNG", onclick: () => exportPanel(key, "png").then((r) => download(r.name, dataUrlBlob(r.data))) })));
      charts.append(box);
    }
    function exportPanel(key, format) {
      const name = `tokengeo-flow-${key}.${format}`;
      if (key === "sphere") {
        const Z = 1600, c = Z / 2, rad = Z * 0.42, pts = projected();
        if (format === "svg") {
          const dots = pts.map((q) => `<circle cx="${(c + rad * q.x).toFixed(2)}" cy="${(c - rad * q.y).toFixed(2)}" r="${(10 + 4 * q.z).toFixed(2)}" fill="${colourOf(q.k)}" opacity="${q.z < 0 ? 0.25 : 0.9}"/>`).join("");
          return Promise.resolve({ name, width: Z, height: Z, data: `<svg xmlns="http://www.w3.org/2000/svg" width="${Z}" height="${Z}" viewBox="0 0 ${Z} ${Z}"><rect width="${Z}" height="${Z}" fill="#fff"/><circle cx="${c}" cy="${c}" r="${rad}" fill="none" stroke="#bbb" stroke-width="3"/>${dots}<text x="20" y="50" font-family="sans-serif" font-size="36">t = ${fmt(D.t[st.r])}, path ${st.path}, H = ${D.n_heads}</text></svg>` });
        }
        const cv = el("canvas", { width: Z, height: Z }), ctx = cv.getContext("2d");
        ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, Z, Z); ctx.lineWidth = 3; ctx.strokeStyle = "#bbb";
        ctx.beginPath(); ctx.arc(c, c, rad, 0, 2 * Math.PI); ctx.stroke();
        for (const q of pts) { ctx.globalAlpha = q.z < 0 ? 0.25 : 0.9; ctx.fillStyle = colourOf(q.k); ctx.beginPath(); ctx.arc(c + rad * q.x, c - rad * q.y, 10 + 4 * q.z, 0, 2 * Math.PI); ctx.fill(); }
        ctx.globalAlpha = 1; ctx.fillStyle = "#000"; ctx.font = "36px sans-serif"; ctx.fillText(`t = ${fmt(D.t[st.r])}, path ${st.path}, H = ${D.n_heads}`, 20, 50);
        return Promise.resolve({ name, width: Z, height: Z, data: cv.toDataURL("image/png") });
      }
      const svgEl = charts.querySelector(`[data-kind="${key}"] svg`);
      const text = new XMLSerializer().serializeToString(svgEl);
      const big = text.replace(/width="(\d+)" height="(\d+)"/, (m, w, h) => `width="${w * 4}" height="${h * 4}"`);
      if (format === "svg") return Promise.resolve({ name, data: big, width: svgEl.width.baseVal.value * 4, height: svgEl.height.baseVal.value * 4 });
      return new Promise((resolve, reject) => {
        const img = new Image();
        img.onload = () => {
          const cv = el("canvas", { width: img.width, height: img.height });
          cv.getContext("2d").drawImage(img, 0, 0);
          resolve({ name, data: cv.toDataURL("image/png"), width: img.width, height: img.height });
        };
        img.onerror = () => reject(new Error("the chart did not render"));
        img.src = "data:image/svg+xml;base64," + btoa(unescape(encodeURIComponent(big)));
      });
    }
    chart("E", "Energy E(t)", false);
    chart("G2", "Strong gradient G²(t)", true);
    let drag = null;
    canvas.addEventListener("mousedown", (e) => { drag = [e.clientX, e.clientY, ...st.rot]; });
    window.addEventListener("mouseup", () => { drag = null; });
    canvas.addEventListener("mousemove", (e) => {
      if (!drag) return;
      st.rot = [drag[2] + (e.clientX - drag[0]) * 0.01, drag[3] + (e.clientY - drag[1]) * 0.01];
      draw();
    });
    slider.addEventListener("input", () => { st.r = +slider.value; draw(); });
    pathSel.addEventListener("change", () => { st.path = +pathSel.value; draw(); });
    function toggle() {
      st.playing = !st.playing;
      play.textContent = st.playing ? "❚❚ pause" : "▶ play";
      const step = () => { if (!st.playing) return; st.r = (st.r + 1) % R; draw(); requestAnimationFrame(step); };
      if (st.playing) requestAnimationFrame(step);
    }
    play.addEventListener("click", toggle);
    document.addEventListener("keydown", (ev) => {
      if (ev.key === "ArrowRight" || ev.key === "ArrowLeft") { ev.preventDefault(); st.r = Math.max(0, Math.min(R - 1, st.r + (ev.key === "ArrowRight" ? 1 : -1))); draw(); }
      else if (ev.key === " ") { ev.preventDefault(); toggle(); }
    });
    Object.assign(TG, { exportPanel, draw, setTime: (r) => { st.r = r; draw(); } });
    inflate(D.x).then((u) => {
      X = new Int16Array(u.buffer, u.byteOffset, u.byteLength / 2);
      st.r = 0; draw(); TG.ready = true;
    });
  }

  // =====================================================================================
  // run page: a reproduce folder's report as blocks of plain strings (tokengeo.view.runs);
  // every string goes into the DOM as text, never as markup
  // =====================================================================================
  const PNG_B64 = /^[A-Za-z0-9+/]*={0,2}$/;
  function runTable(b) {
    const head = el("tr", {}, ...b.header.map((h) => el("th", { text: h })));
    const rows = b.rows.map((r) => el("tr", {}, ...r.map((c) => el("td", c.klass ? { class: c.klass, text: c.text } : { text: c.text }))));
    return el("table", {}, b.text ? el("caption", { text: b.text }) : null, el("thead", {}, head), el("tbody", {}, ...rows));
  }
  function runFigure(b) {
    if (b.problem || !PNG_B64.test(b.data)) return el("p", { class: "muted", text: "Figure " + b.name + ": " + b.path + " " + (b.problem || "not embedded") + "." });
    const src = "data:image/png;base64," + b.data;
    return el("figure", {}, el("img", { alt: b.name, src }),
      el("figcaption", {}, b.name + " · ", el("a", { download: b.name + ".png", href: src, text: "PNG" })));
  }
  function runBlock(b) {
    if (b.kind === "h1" || b.kind === "h2" || b.kind === "h3") return el(b.kind, { text: b.text });
    if (b.kind === "em") return el("p", {}, el("em", { text: b.text }));
    if (b.kind === "rule") return el("p", { class: "muted", text: b.text });
    if (b.kind === "table") return runTable(b);
    if (b.kind === "figure") return runFigure(b);
    return el("p", {}, ...(b.parts || [[false, b.text]]).map(([bold, part]) => (bold ? el("b", { text: part }) : part)));
  }
  function runPage() {
    const D = DATA;
    const nav = el("nav", { class: "suites" }, ...D.sections.map((s, k) => el("a", { href: "#suite-" + k, text: s.title })));
    const main = el("div", { id: "main" });
    for (const [k, s] of D.sections.entries()) {
      main.append(el("section", { class: "suite panel", id: "suite-" + k, "data-kind": "suite" }, ...s.blocks.map(runBlock)));
    }
    app.replaceChildren(el("header", {}, el("h1", { text: "tokengeo view — " + D.title }),
      el("div", { class: "meta" }, D.report ? el("a", { href: D.report, text: "report.html" }) : "", " · " + D.source)),
    el("div", { id: "layout" }, el("div", { id: "side" }, nav), main));
    TG.ready = true;
    document.body.dataset.ready = "run";
  }

  const pages = { heads: headsPage, flow: flowPage, run: runPage };
  try {
    pages[DATA.kind]();
  } catch (err) {
    app.replaceChildren(el("p", { text: "tokengeo view could not draw this page: " + err.message }));
    throw err;
  }
})();
