#include "referee/report_svg.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "ops/registry.h"

namespace tribunal::report_svg {
namespace {

constexpr const char* kRed = "#c62828";
constexpr const char* kBlue = "#1565c0";
constexpr const char* kOrange = "#ef6c00";

// One axis row of the narrowing: `count` positions [first, first + count) drawn across [x0, x1] at
// height y, ticks at `ticks` (positions), the highlighted position range [lo, hi] in red.
struct Row {
  double x0, x1, y;
  double first, last;  // the values at x0 and x1
  double x(double v) const {
    return last == first ? (x0 + x1) / 2 : x0 + (v - first) / (last - first) * (x1 - x0);
  }
};

}  // namespace

std::string escape(const std::string& text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string narrowing(const Narrowing& n) {
  constexpr double W = 980, left = 170, right = 950;
  std::string s = fmt::format(
      R"(<svg class="narrowing" role="img" aria-label="narrowing" viewBox="0 0 {} 330" width="{}" height="330">)",
      W, W);
  const auto label = [&](double y, const std::string& title, const std::string& sub) {
    s += fmt::format(R"(<text x="8" y="{}" class="lvl">{}</text><text x="8" y="{}" class="sub">{}</text>)",
                     y - 4, escape(title), y + 12, escape(sub));
  };
  const auto rounds = [&](int level) {
    return fmt::format("{} round{}", n.rounds[level - 1], n.rounds[level - 1] == 1 ? "" : "s");
  };

  // Level 1: the trajectory, its checkpoints; the located interval in red.
  const uint64_t T = n.checkpoints.empty() ? 0 : n.checkpoints.back();
  const Row r1{left, right, 50, 0, static_cast<double>(T)};
  label(r1.y, "trajectory", fmt::format("level 1 · {}", rounds(1)));
  s += fmt::format(R"(<line x1="{}" y1="{}" x2="{}" y2="{}" class="axis"/>)", r1.x0, r1.y, r1.x1, r1.y);
  for (size_t i = 0; i < n.checkpoints.size(); ++i) {
    const double x = r1.x(static_cast<double>(n.checkpoints[i]));
    s += fmt::format(R"(<line x1="{:.1f}" y1="{}" x2="{:.1f}" y2="{}" class="tick"/>)", x, r1.y - 7, x,
                     r1.y + 7);
  }
  s += fmt::format(
      R"(<text x="{}" y="{}" class="sub">step 0</text><text x="{}" y="{}" class="sub" text-anchor="end">step {}</text>)",
      r1.x0, r1.y + 24, r1.x1, r1.y + 24, T);
  if (n.level < 2 || n.interval == 0 || n.interval >= n.checkpoints.size()) {
    s += fmt::format(
        R"(<text x="{}" y="{}" class="note">decided at level 1 (the trajectory's first checkpoints)</text></svg>)",
        left, r1.y + 60);
    return s;
  }
  const uint64_t a = n.checkpoints[n.interval - 1], b = n.checkpoints[n.interval];
  s += fmt::format(R"(<rect x="{:.1f}" y="{}" width="{:.1f}" height="14" fill="{}" opacity="0.85"/>)",
                   r1.x(static_cast<double>(a)), r1.y - 7,
                   std::max(2.0, r1.x(static_cast<double>(b)) - r1.x(static_cast<double>(a))), kRed);
  s += fmt::format(
      R"(<text x="{:.1f}" y="{}" class="hl" text-anchor="middle">checkpoints {}–{}: steps [{}, {}]</text>)",
      std::clamp(r1.x((a + b) / 2.0), left + 80, right - 80), r1.y - 12, n.interval - 1, n.interval, a, b);

  // Level 2: the interval's steps; the located step in red.
  const Row r2{left, right, 150, static_cast<double>(a), static_cast<double>(b)};
  s += fmt::format(R"(<polygon points="{:.1f},{} {:.1f},{} {},{} {},{}" class="zoom"/>)",
                   r1.x(static_cast<double>(a)), r1.y + 8, r1.x(static_cast<double>(b)), r1.y + 8, r2.x1,
                   r2.y - 8, r2.x0, r2.y - 8);
  label(r2.y, "interval", fmt::format("level 2 · {}", rounds(2)));
  s += fmt::format(R"(<line x1="{}" y1="{}" x2="{}" y2="{}" class="axis"/>)", r2.x0, r2.y, r2.x1, r2.y);
  const uint64_t every = std::max<uint64_t>(1, (b - a) / 50);
  for (uint64_t t = a; t <= b; t += every) {
    const double x = r2.x(static_cast<double>(t));
    s += fmt::format(R"(<line x1="{:.1f}" y1="{}" x2="{:.1f}" y2="{}" class="tick"/>)", x, r2.y - 5, x,
                     r2.y + 5);
  }
  s += fmt::format(
      R"(<text x="{}" y="{}" class="sub">step {}</text><text x="{}" y="{}" class="sub" text-anchor="end">step {}</text>)",
      r2.x0, r2.y + 24, a, r2.x1, r2.y + 24, b);
  if (n.level < 3 && n.level != 2) return s + "</svg>";
  // The step t → t+1 is the located one: its segment.
  const double sx0 = r2.x(static_cast<double>(n.step)), sx1 = r2.x(static_cast<double>(n.step + 1));
  s += fmt::format(R"(<rect x="{:.1f}" y="{}" width="{:.1f}" height="14" fill="{}"/>)", sx0, r2.y - 7,
                   std::max(3.0, sx1 - sx0), kRed);
  s += fmt::format(R"(<text x="{:.1f}" y="{}" class="hl" text-anchor="middle">step {}</text>)",
                   std::clamp((sx0 + sx1) / 2, left + 30, right - 30), r2.y - 12, n.step);
  if (n.level < 3 || n.nodes == 0) {
    s += fmt::format(R"(<text x="{}" y="{}" class="note">decided at level 2 (step {})</text></svg>)", left,
                     r2.y + 60, n.step);
    return s;
  }

  // Level 3: the step's nodes; the located node in red.
  const double y3 = 250, cell = (right - left) / static_cast<double>(n.nodes);
  s += fmt::format(R"(<polygon points="{:.1f},{} {:.1f},{} {},{} {},{}" class="zoom"/>)", sx0, r2.y + 8,
                   std::max(sx0 + 3, sx1), r2.y + 8, right, y3 - 12, left, y3 - 12);
  label(y3, "step graph", fmt::format("level 3 · {}", rounds(3)));
  for (uint64_t i = 0; i < n.nodes; ++i) {
    const bool hit = i == n.node;
    s += fmt::format(
        R"(<rect x="{:.2f}" y="{}" width="{:.2f}" height="20" fill="{}" stroke="#fff" stroke-width="{}"/>)",
        left + cell * static_cast<double>(i), y3 - 10, std::max(cell, 1.0), hit ? kRed : "#b0bec5",
        cell > 4 ? 1 : 0);
  }
  const double nx = left + cell * (static_cast<double>(n.node) + 0.5);
  s += fmt::format(R"(<text x="{:.1f}" y="{}" class="hl" text-anchor="middle">node {}</text>)",
                   std::clamp(nx, left + 30, right - 30), y3 + 30, n.node);
  s += fmt::format(
      R"(<text x="{}" y="{}" class="sub">node 0</text><text x="{}" y="{}" class="sub" text-anchor="end">node {}</text>)",
      left, y3 + 48, right, y3 + 48, n.nodes - 1);
  return s + "</svg>";
}

namespace {
// The node producing each value (-1: the step's inputs: state, data, constants).
std::vector<int64_t> producers(const StepGraph& g) {
  std::vector<int64_t> producer(g.values.size(), -1);
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (ValueId v : g.nodes[i].outputs) producer[v] = static_cast<int64_t>(i);
  return producer;
}
}  // namespace

std::vector<size_t> graph_nodes_shown(const StepGraph& g, uint64_t located) {
  const size_t N = g.nodes.size();
  std::set<size_t> shown;
  if (N <= 60 || located >= N) {
    for (size_t i = 0; i < N; ++i) shown.insert(i);
  } else {
    const std::vector<int64_t> producer = producers(g);
    for (size_t i = located >= 12 ? located - 12 : 0; i <= std::min<size_t>(N - 1, located + 12); ++i)
      shown.insert(i);
    for (ValueId v : g.nodes[located].inputs)
      if (producer[v] >= 0) shown.insert(static_cast<size_t>(producer[v]));
    for (size_t i = 0; i < N; ++i)
      for (ValueId v : g.nodes[i].inputs)
        if (producer[v] == static_cast<int64_t>(located)) shown.insert(i);
  }
  return {shown.begin(), shown.end()};
}

std::string graph(const StepGraph& g, uint64_t located, const std::vector<size_t>& shown) {
  const size_t N = g.nodes.size();
  std::vector<int64_t> slot(N, -1);  // position in the picture
  for (size_t k = 0; k < shown.size(); ++k) slot[shown[k]] = static_cast<int64_t>(k);
  const std::vector<int64_t> producer = producers(g);
  std::set<size_t> inputs_of, consumers_of;
  if (located < N) {
    for (ValueId v : g.nodes[located].inputs)
      if (producer[v] >= 0) inputs_of.insert(static_cast<size_t>(producer[v]));
    for (size_t i = 0; i < N; ++i)
      for (ValueId v : g.nodes[i].inputs)
        if (producer[v] == static_cast<int64_t>(located)) consumers_of.insert(i);
  }
  const size_t M = shown.size();
  const size_t rows =
      std::max<size_t>(8, static_cast<size_t>(std::ceil(std::sqrt(static_cast<double>(M) * 1.5))));
  const size_t cols = (M + rows - 1) / rows;
  constexpr double bw = 168, bh = 20, gx = 40, gy = 8, pad = 10;
  const double W = pad * 2 + static_cast<double>(cols) * (bw + gx),
               H = pad * 2 + static_cast<double>(rows) * (bh + gy);
  const auto pos = [&](size_t node) {
    const auto i = static_cast<size_t>(slot[node]);
    return std::pair<double, double>{pad + static_cast<double>(i / rows) * (bw + gx),
                                     pad + static_cast<double>(i % rows) * (bh + gy)};
  };
  std::string s = fmt::format(
      R"(<svg class="graph" role="img" aria-label="step graph" viewBox="0 0 {:.0f} {:.0f}" width="{:.0f}" height="{:.0f}">)",
      W, H, W, H);
  // Edges: all of them for a small graph, else only those touching the located node.
  const bool all_edges = M <= 48;
  std::string edges, bold;
  for (size_t i : shown)
    for (ValueId v : g.nodes[i].inputs) {
      if (producer[v] < 0 || slot[static_cast<size_t>(producer[v])] < 0) continue;
      const auto p = static_cast<size_t>(producer[v]);
      const bool touches = p == located || i == located;
      if (!touches && !all_edges) continue;
      const auto [x0, y0] = pos(p);
      const auto [x1, y1] = pos(i);
      const double ax = x0 + bw, ay = y0 + bh / 2, bx = x1, by = y1 + bh / 2;
      const std::string path =
          static_cast<size_t>(slot[p]) / rows == static_cast<size_t>(slot[i]) / rows
              ? fmt::format("M{:.0f},{:.0f} C{:.0f},{:.0f} {:.0f},{:.0f} {:.0f},{:.0f}", ax, ay, ax + 18, ay,
                            ax + 18, y1 + bh / 2, x1 + bw, y1 + bh / 2)
              : fmt::format("M{:.0f},{:.0f} C{:.0f},{:.0f} {:.0f},{:.0f} {:.0f},{:.0f}", ax, ay, ax + gx / 2,
                            ay, bx - gx / 2, by, bx, by);
      (touches ? bold : edges) +=
          fmt::format(R"(<path d="{}" class="{}"/>)", path, touches ? "edge hot" : "edge");
    }
  s += edges + bold;
  for (size_t i : shown) {
    const auto [x, y] = pos(i);
    const Node& node = g.nodes[i];
    const std::string out = node.outputs.empty() ? "" : g.values[node.outputs[0]].name;
    const char* fill = i == located ? kRed : "#eceff1";
    const char* stroke = i == located            ? kRed
                         : inputs_of.count(i)    ? kOrange
                         : consumers_of.count(i) ? kBlue
                                                 : "#b0bec5";
    s += fmt::format(
        R"(<g{}><title>node {}: {} → {}</title><rect x="{:.0f}" y="{:.0f}" width="{}" height="{}" rx="3" fill="{}" stroke="{}" stroke-width="{}"/>)",
        i == located ? R"( id="located-box")" : "", i, op_name(node.op), escape(out), x, y, bw, bh, fill,
        stroke, i == located || inputs_of.count(i) || consumers_of.count(i) ? 2 : 1);
    std::string text = fmt::format("{} {}", i, op_name(node.op));
    if (text.size() < 24 && !out.empty()) text += " · " + out;
    if (text.size() > 27) text = text.substr(0, 26) + "…";
    s += fmt::format(R"(<text x="{:.0f}" y="{:.0f}" class="{}">{}</text></g>)", x + 5, y + 14,
                     i == located ? "node hot" : "node", escape(text));
  }
  return s + "</svg>";
}

std::string losses(const std::array<std::vector<LossPoint>, 2>& series, int64_t first_differing,
                   const std::array<std::string, 2>& names) {
  constexpr double W = 980, H = 330, l = 80, r = 960, t = 24, b = 260;
  // The state at step 0 was produced by no step: its loss is a placeholder, not drawn.
  const auto shown = [](const LossPoint& p) { return p.first > 0; };
  double x_lo = INFINITY, x_hi = -INFINITY, y_lo = INFINITY, y_hi = -INFINITY;
  bool any_clipped = false;
  for (const auto& s : series)
    for (const auto& [step, loss] : s) {
      if (!shown({step, loss})) continue;
      x_lo = std::min(x_lo, static_cast<double>(step));
      x_hi = std::max(x_hi, static_cast<double>(step));
      if (!std::isfinite(loss)) {
        any_clipped = true;
        continue;
      }
      y_lo = std::min(y_lo, loss);
      y_hi = std::max(y_hi, loss);
    }
  if (!(x_lo <= x_hi)) return "";
  if (!(y_lo <= y_hi)) y_lo = 0, y_hi = 1;  // only non-finite losses
  if (x_hi == x_lo) x_hi = x_lo + 1;
  const bool log_scale = y_lo > 0 && y_hi / y_lo > 10;
  const auto f = [&](double v) { return log_scale ? std::log10(v) : v; };
  double f_lo = f(y_lo), f_hi = f(y_hi);
  if (f_hi == f_lo) f_hi = f_lo + 1;
  // A clipped (non-finite) loss sits on a band above the plot's top.
  const double top = any_clipped ? t + 18 : t;
  const auto X = [&](double v) { return l + (v - x_lo) / (x_hi - x_lo) * (r - l); };
  const auto Y = [&](double v) {
    if (!std::isfinite(v)) return t + 4.0;
    return b - (f(v) - f_lo) / (f_hi - f_lo) * (b - top);
  };
  std::string s = fmt::format(
      R"(<svg class="losses" role="img" aria-label="training loss by step" data-scale="{}" viewBox="0 0 {} {}" width="{}" height="{}">)",
      log_scale ? "log" : "linear", W, H, W, H);
  s += fmt::format(
      R"(<line x1="{}" y1="{}" x2="{}" y2="{}" class="axis"/><line x1="{}" y1="{}" x2="{}" y2="{}" class="axis"/>)",
      l, b, r, b, l, t, l, b);
  for (int i = 0; i <= 4; ++i) {
    const double fv = f_lo + (f_hi - f_lo) * i / 4;
    const double v = log_scale ? std::pow(10.0, fv) : fv;
    s += fmt::format(R"(<text x="{}" y="{:.1f}" class="sub" text-anchor="end">{:.3g}</text>)", l - 6,
                     Y(v) + 4, v);
  }
  s += fmt::format(
      R"(<text x="{}" y="{}" class="sub">{:.0f}</text><text x="{}" y="{}" class="sub" text-anchor="end">{:.0f}</text>)",
      l, b + 18, x_lo, r, b + 18, x_hi);
  s += fmt::format(R"(<text x="{}" y="{}" class="axis-title" text-anchor="middle">step</text>)", (l + r) / 2,
                   b + 20);
  s += fmt::format(
      R"svg(<text x="18" y="{}" class="axis-title" text-anchor="middle" transform="rotate(-90 18 {})">training loss{}</text>)svg",
      (t + b) / 2, (t + b) / 2, log_scale ? " (log scale)" : "");
  if (any_clipped)
    s += fmt::format(R"(<text x="{}" y="{}" class="note">not finite (clipped)</text>)", l + 6, t + 8);
  if (first_differing >= 0) {
    const double x = X(static_cast<double>(first_differing));
    s += fmt::format(
        R"(<line x1="{:.1f}" y1="{}" x2="{:.1f}" y2="{}" stroke="{}" stroke-dasharray="6 4" stroke-width="2"/>)",
        x, t, x, b, kRed);
    s += fmt::format(
        R"(<text x="{:.1f}" y="{}" class="hl" text-anchor="{}">first differing checkpoint: step {}</text>)",
        x + (x > W / 2 ? -6 : 6), t + 30, x > W / 2 ? "end" : "start", first_differing);
  }
  const char* colours[2] = {kBlue, kOrange};
  for (size_t p = 0; p < 2; ++p) {
    std::string points;
    for (const auto& [step, loss] : series[p])
      if (shown({step, loss})) points += fmt::format("{:.1f},{:.1f} ", X(static_cast<double>(step)), Y(loss));
    if (points.empty()) continue;
    s += fmt::format(R"(<polyline points="{}" fill="none" stroke="{}" stroke-width="{}" {}/>)", points,
                     colours[p], p == 0 ? 3 : 2, p == 1 ? R"(stroke-dasharray="5 3")" : "");
    for (const auto& [step, loss] : series[p])
      if (shown({step, loss}))
        s += fmt::format(
            R"(<circle cx="{:.1f}" cy="{:.1f}" r="3" fill="{}"><title>{}: step {}, loss {}</title></circle>)",
            X(static_cast<double>(step)), Y(loss), colours[p], escape(names[p]), step, loss);
    s += fmt::format(R"(<text x="{}" y="{}" fill="{}" class="sub legend">— {}</text>)",
                     l + 300.0 * static_cast<double>(p), b + 48, colours[p], escape(names[p]));
  }
  return s + "</svg>";
}

}  // namespace tribunal::report_svg
