// deskpilot panel (seed 004): polls /state, shows the screenshot with its overlays and the
// model's story; with `--annotate browser` it draws the overlays itself on a canvas and
// posts the annotated PNG back (POST /annotated {seq, image_b64}), as the seed's panel did.
//
// The overlay drawing mirrors deskpilot.imaging._overlay (the native default): same
// layers, sizes, trail fade ((N - age) / N) and shrink (trail_shrink ** age).
"use strict";

const POLL_MS = 250;
const panel = { config: null, imageKey: "", postedSeq: -1, drawing: false };
const $ = (id) => document.getElementById(id);

async function getJSON(url) {
  const response = await fetch(url, { cache: "no-store" });
  if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
  return response.json();
}

function loadImage(src) {
  return new Promise((resolve, reject) => {
    const img = new Image();
    img.onload = () => resolve(img);
    img.onerror = () => reject(new Error(`cannot load ${src.slice(0, 40)}`));
    img.src = src;
  });
}

const px = (n, size) => (n * size) / 1000;

function pointsOf(action) {
  if (action.x1 === undefined || action.y1 === undefined) return [];
  if (action.x2 !== undefined && action.y2 !== undefined) return [[action.x1, action.y1], [action.x2, action.y2]];
  return [[action.x1, action.y1]];
}

function scrollWords(a) {
  const words = [];
  if (a.dy) words.push(`${a.dy > 0 ? "down" : "up"} ${Math.abs(a.dy)}`);
  if (a.dx) words.push(`${a.dx > 0 ? "right" : "left"} ${Math.abs(a.dx)}`);
  return words.join(" ") || "0";
}

function clean(text, limit = 48) {
  const ascii = String(text).replace(/\n/g, " ").replace(/[^\x20-\x7e]/g, "?");
  return ascii.length <= limit ? ascii : ascii.slice(0, limit - 3) + "...";
}

function actionLabel(index, a) {
  const parts = [String(index), a.name];
  if (a.name === "type") parts.push(`"${a.text ?? ""}"`);
  else if (a.name === "key") parts.push(a.keys ?? "");
  else if (a.name === "scroll") parts.push(scrollWords(a));
  const pts = pointsOf(a).map(([x, y]) => `${x},${y}`).join(">");
  if (pts) parts.push(pts);
  return clean(parts.join(" "));
}

function gradient(ctx, cx, cy, r, stops) {
  const g = ctx.createRadialGradient(cx, cy, 0, cx, cy, Math.max(r, 1e-6));
  for (const [pos, color] of stops) g.addColorStop(Math.min(1, Math.max(0, pos)), color);
  return g;
}

function drawOverlays(ctx, W, H, state, ui) {
  const heat = ui.executed_heat, boxes = ui.bbox_heat, labels = ui.labels;
  const s = labels.scale || Math.max(1, Math.round(Math.min(W, H) / 450));
  const labelList = [];
  const label = (text, x, y, color) => labelList.push({ text, x, y, color });

  if (boxes.enabled) {
    for (const b of state.bboxes) {
      const x0 = Math.min(W - 1, Math.floor(px(b.x1, W))), y0 = Math.min(H - 1, Math.floor(px(b.y1, H)));
      const x1 = Math.max(x0 + 1, Math.min(W, Math.ceil(px(b.x2, W))));
      const y1 = Math.max(y0 + 1, Math.min(H, Math.ceil(px(b.y2, H))));
      const w = x1 - x0, h = y1 - y0;
      ctx.fillStyle = gradient(ctx, x0 + w / 2, y0 + h / 2, 0.5 * Math.hypot(w, h), boxes.fill_stops);
      ctx.fillRect(x0, y0, w, h);
      const bw = boxes.border_width;
      if (bw > 0) {
        ctx.fillStyle = boxes.border;
        if (2 * bw >= w || 2 * bw >= h) ctx.fillRect(x0, y0, w, h);
        else {
          ctx.fillRect(x0, y0, w, bw);
          ctx.fillRect(x0, y1 - bw, w, bw);
          ctx.fillRect(x0, y0 + bw, bw, h - 2 * bw);
          ctx.fillRect(x1 - bw, y0 + bw, bw, h - 2 * bw);
        }
      }
    }
  }

  if (heat.enabled) {
    const n = heat.trail_turns;
    const previous = n > 1 ? state.trail.slice(Math.max(0, state.trail.length - (n - 1))) : [];
    const turns = [...previous, state.actions];
    const radius = heat.radius_scale * Math.max(W, H);
    turns.forEach((turn, i) => {
      const age = turns.length - 1 - i;
      const shrink = Math.pow(heat.trail_shrink, age);
      ctx.globalAlpha = Math.round((256 * (n - age)) / n) / 256;
      for (const a of turn) {
        let pts = pointsOf(a).map(([x, y]) => [px(x, W), px(y, H)]);
        if (pts.length === 2 && shrink < 1) {
          const mx = (pts[0][0] + pts[1][0]) / 2, my = (pts[0][1] + pts[1][1]) / 2;
          pts = pts.map(([x, y]) => [mx + (x - mx) * shrink, my + (y - my) * shrink]);
        }
        for (const [x, y] of pts) {
          const r = radius * shrink;
          ctx.fillStyle = gradient(ctx, x, y, r, heat.stops);
          ctx.beginPath();
          ctx.arc(x, y, r, 0, 2 * Math.PI);
          ctx.fill();
        }
      }
    });
    ctx.globalAlpha = 1;
  }

  const ringOut = 6 * s, ringW = 1.5 * s;
  const ring = (x, y, rIn, rOut, color) => {
    ctx.strokeStyle = color;
    ctx.lineWidth = rOut - rIn;
    ctx.beginPath();
    ctx.arc(x, y, (rIn + rOut) / 2, 0, 2 * Math.PI);
    ctx.stroke();
  };
  const disc = (x, y, r, color) => {
    ctx.fillStyle = color;
    ctx.beginPath();
    ctx.arc(x, y, r, 0, 2 * Math.PI);
    ctx.fill();
  };
  const legend = [];
  state.actions.forEach((a, i) => {
    const index = i + 1;
    const pts = pointsOf(a).map(([x, y]) => [px(x, W), px(y, H)]);
    if (!pts.length) {
      legend.push(actionLabel(index, a));
      return;
    }
    if (labels.markers) {
      if (pts.length === 2) {
        ctx.lineCap = "round";
        for (const [width, color] of [[3 * s + 2, labels.outline], [1.5 * s, labels.action_color]]) {
          ctx.strokeStyle = color;
          ctx.lineWidth = width;
          ctx.beginPath();
          ctx.moveTo(pts[0][0], pts[0][1]);
          ctx.lineTo(pts[1][0], pts[1][1]);
          ctx.stroke();
        }
        disc(pts[1][0], pts[1][1], 3.5 * s + 1, labels.outline);
        disc(pts[1][0], pts[1][1], 3.5 * s, labels.action_color);
      }
      const [x, y] = pts[0];
      ring(x, y, ringOut - ringW - 1, ringOut + 1, labels.outline);
      ring(x, y, ringOut - ringW, ringOut, labels.action_color);
      if (a.name === "double_click") ring(x, y, ringOut + 1.5 * s, ringOut + 3 * s, labels.action_color);
      if (["click", "double_click", "right_click"].includes(a.name)) disc(x, y, 1.5 * s, labels.action_color);
    }
    if (labels.enabled) {
      const text = actionLabel(index, a);
      const [x, y] = a.name === "drag" ? pts[1] : pts[0];
      const w = text.length * 6 * s + 2 * s, h = 10 * s + 2 * s, gap = Math.trunc(ringOut + 3 * s);
      const lx = Math.trunc(x) + gap + w <= W ? Math.trunc(x) + gap : Math.trunc(x) - gap - w;
      label(text, lx, Math.trunc(y) - Math.floor(h / 2), labels.color);
    }
  });

  if (labels.enabled) {
    if (boxes.enabled) {
      state.bboxes.forEach((b, i) => {
        const text = clean(`b${i + 1} ${b.label ?? ""}`.trimEnd());
        label(text, Math.floor(px(b.x1, W)) + boxes.border_width, Math.floor(px(b.y1, H)) + boxes.border_width, labels.box_color);
      });
    }
    const h = 10 * s + 2 * s;
    let y = H - h - s;
    for (const text of legend.slice().reverse()) {
      label(text, s, y, labels.color);
      y -= h + s;
    }
    ctx.font = `${10 * s}px monospace`;
    ctx.textBaseline = "top";
    for (const item of labelList) {
      const w = item.text.length * 6 * s + 2 * s, h2 = 10 * s + 2 * s;
      const x = Math.max(0, Math.min(item.x, W - w)), y2 = Math.max(0, Math.min(item.y, H - h2));
      ctx.fillStyle = labels.background;
      ctx.fillRect(x, y2, w, h2);
      ctx.fillStyle = item.color;
      ctx.fillText(item.text, x + s, y2 + s, w - 2 * s);
    }
  }
}

function showImage(img) {
  const canvas = $("view");
  canvas.width = img.naturalWidth;
  canvas.height = img.naturalHeight;
  const ctx = canvas.getContext("2d");
  ctx.drawImage(img, 0, 0);
  $("view-note").hidden = true;
  return ctx;
}

async function annotateInBrowser(light) {
  // The seed's flow: raw screenshot -> overlays on a canvas -> PNG -> POST /annotated.
  const started = performance.now();
  const state = await getJSON("/state");
  if (!state.raw_b64 || state.pending_seq !== light.pending_seq) return;
  const img = await loadImage(`data:image/png;base64,${state.raw_b64}`);
  const ctx = showImage(img);
  drawOverlays(ctx, img.naturalWidth, img.naturalHeight, state, panel.config.ui);
  const dataUrl = $("view").toDataURL("image/png");
  const response = await fetch("/annotated", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ seq: state.pending_seq, image_b64: dataUrl.slice(dataUrl.indexOf(",") + 1) }),
  });
  panel.postedSeq = state.pending_seq;
  // How long the page's part took (fetch + decode + draw + export + POST), for benchmarks.
  document.body.dataset.annotateMs = (performance.now() - started).toFixed(1);
  document.body.dataset.posted = String(state.pending_seq);
  document.body.dataset.postStatus = String(response.status);
  if (!response.ok) {
    const body = await response.json().catch(() => ({}));
    showError(`annotated image refused (${response.status}): ${body.error ?? ""}`);
  }
}

async function showEngineImage(light) {
  // Native annotation: the engine's annotated PNG; the raw one until it exists.
  const which = light.annotated_seq === light.turn && light.turn > 0 ? "annotated" : "raw";
  const key = `${light.msg_id}:${which}`;
  if (key === panel.imageKey || light.turn === 0) return;
  const img = await loadImage(`/${which}.png?msg=${light.msg_id}&seq=${light.annotated_seq}`);
  showImage(img);
  panel.imageKey = key;
  document.body.dataset.shown = key;
}

function showError(text) {
  const el = $("error");
  el.textContent = text || "";
  el.hidden = !text;
}

function renderList(el, items, describe) {
  el.replaceChildren(...items.map((item, i) => {
    const li = document.createElement("li");
    li.textContent = describe(item, i);
    return li;
  }));
}

function render(light) {
  const phase = $("phase");
  phase.textContent = light.phase;
  phase.className = `phase ${light.phase}`;
  $("turn").textContent = String(light.turn);
  $("mode").textContent = light.annotate;
  $("observation").textContent = light.observation;
  $("vlm_json").textContent = light.vlm_json;
  renderList($("actions"), light.actions, (a, i) => actionLabel(i + 1, a));
  renderList($("bboxes"), light.bboxes, (b, i) => `b${i + 1} [${b.x1}, ${b.y1}, ${b.x2}, ${b.y2}] ${b.label ?? ""}`);
  renderList($("rejected"), light.rejected, (r) => `${r.kind}${r.index !== undefined ? " " + (r.index + 1) : ""}: ${r.reason}`);
  if (light.error) showError(light.error);
  document.body.dataset.phase = light.phase;
  // What to paste, shown while the engine waits for it.
  $("inject-hint").hidden = light.phase !== "waiting_inject";
  document.body.dataset.turn = String(light.turn);
}

async function tick() {
  try {
    if (!panel.config) panel.config = await getJSON("/config");
    const light = await getJSON("/state?images=0");
    render(light);
    if (!panel.drawing) {
      panel.drawing = true;
      try {
        if (light.annotate === "browser") {
          if (light.waiting_annotation && panel.postedSeq !== light.pending_seq) await annotateInBrowser(light);
        } else {
          await showEngineImage(light);
        }
      } finally {
        panel.drawing = false;
      }
    }
  } catch (error) {
    showError(String(error.message || error));
  }
  setTimeout(tick, POLL_MS);
}

$("inject-send").addEventListener("click", async () => {
  const status = $("inject-status");
  const response = await fetch("/inject", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ vlm_text: $("inject").value }),
  });
  status.textContent = response.ok ? "queued" : `refused (${response.status})`;
});

tick();
