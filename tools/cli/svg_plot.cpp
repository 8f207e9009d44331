// SVG line plots and heatmaps for the run report.
#include "svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace moetrain::cli {

namespace {
std::string fmt(const char* f, double v) {
    char b[64];
    std::snprintf(b, sizeof b, f, v);
    return b;
}

// About n "nice" tick values (1, 2, 5 x 10^k steps) covering [lo, hi].
std::vector<double> nice_ticks(double lo, double hi, int n) {
    std::vector<double> t;
    if (!(hi > lo)) return {lo};
    const double raw = (hi - lo) / n;
    const double mag = std::pow(10.0, std::floor(std::log10(raw)));
    double step = mag;
    for (double m : {1.0, 2.0, 5.0, 10.0})
        if (m * mag >= raw) {
            step = m * mag;
            break;
        }
    for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9; v += step)
        t.push_back(std::abs(v) < step * 1e-9 ? 0.0 : v);
    return t;
}

struct Range {
    double lo = std::numeric_limits<double>::infinity();
    double hi = -std::numeric_limits<double>::infinity();
    void add(double v) {
        lo = std::min(lo, v);
        hi = std::max(hi, v);
    }
    bool empty() const { return !(hi >= lo); }
    void pad() {  // a flat series still gets a visible range
        if (hi == lo) {
            const double d = lo == 0 ? 1 : std::abs(lo) * 0.05;
            lo -= d;
            hi += d;
        }
    }
};

constexpr int kLeft = 64, kRight = 16, kTop = 30, kBottom = 42;

std::string svg_open(int w, int h, const std::string& title) {
    return "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"plot\" width=\"" + std::to_string(w) +
           "\" height=\"" + std::to_string(h) + "\" viewBox=\"0 0 " + std::to_string(w) + " " +
           std::to_string(h) + "\" role=\"img\" aria-label=\"" + xml_escape(title) +
           "\"><rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>" + "<text x=\"" +
           std::to_string(w / 2) + "\" y=\"18\" text-anchor=\"middle\" class=\"title\">" +
           xml_escape(title) + "</text>";
}

std::string axis_labels(int w, int h, const std::string& xl, const std::string& yl) {
    return "<text x=\"" + std::to_string(kLeft + (w - kLeft - kRight) / 2) + "\" y=\"" +
           std::to_string(h - 6) + "\" text-anchor=\"middle\" class=\"label\">" + xml_escape(xl) +
           "</text><text transform=\"translate(14," +
           std::to_string(kTop + (h - kTop - kBottom) / 2) +
           ") rotate(-90)\" text-anchor=\"middle\" class=\"label\">" + xml_escape(yl) + "</text>";
}
}  // namespace

std::string xml_escape(const std::string& s) {
    std::string o;
    for (char c : s) {
        if (c == '&')
            o += "&amp;";
        else if (c == '<')
            o += "&lt;";
        else if (c == '>')
            o += "&gt;";
        else if (c == '"')
            o += "&quot;";
        else
            o += c;
    }
    return o;
}

std::string tick_label(double v) {
    if (v == 0) return "0";
    const double a = std::abs(v);
    if (a >= 1e6 || a < 1e-3) {
        std::string s = fmt("%.3g", v);  // 2.5e-04 -> 2.5e-4
        auto e = s.find('e');
        if (e != std::string::npos) {
            std::string m = s.substr(0, e), x = s.substr(e + 1);
            const bool neg = x[0] == '-';
            x = x.substr(1);
            x.erase(0, std::min(x.find_first_not_of('0'), x.size() - 1));
            return m + "e" + (neg ? "-" : "") + x;
        }
        return s;
    }
    if (a >= 1000) return fmt("%.0f", v);  // 80000, not 8e+04
    return fmt("%.4g", v);
}

std::string render_line_plot(const LinePlot& p, int w, int h) {
    auto ty = [&](double v) { return p.log_y ? std::log10(v) : v; };
    auto usable = [&](double x, double y) {
        return std::isfinite(x) && std::isfinite(y) && (!p.log_y || y > 0);
    };
    Range xr, yr;
    for (const Series& s : p.series)
        for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i)
            if (usable(s.x[i], s.y[i])) {
                xr.add(s.x[i]);
                yr.add(ty(s.y[i]));
            }
    std::string o = svg_open(w, h, p.title);
    const double pw = w - kLeft - kRight, ph = h - kTop - kBottom;
    o += "<rect x=\"" + std::to_string(kLeft) + "\" y=\"" + std::to_string(kTop) + "\" width=\"" +
         fmt("%.0f", pw) + "\" height=\"" + fmt("%.0f", ph) + "\" fill=\"none\" stroke=\"#999\"/>";
    o += axis_labels(w, h, p.x_label, p.y_label);
    if (xr.empty()) {
        o += "<text x=\"" + std::to_string(w / 2) + "\" y=\"" + std::to_string(h / 2) +
             "\" text-anchor=\"middle\" class=\"label\">no data</text></svg>";
        return o;
    }
    xr.pad();
    yr.pad();
    auto px = [&](double x) { return kLeft + (x - xr.lo) / (xr.hi - xr.lo) * pw; };
    auto py = [&](double y) { return kTop + ph - (ty(y) - yr.lo) / (yr.hi - yr.lo) * ph; };
    auto pyt = [&](double t) { return kTop + ph - (t - yr.lo) / (yr.hi - yr.lo) * ph; };
    for (double t : nice_ticks(xr.lo, xr.hi, 6))
        o += "<line x1=\"" + fmt("%.1f", px(t)) + "\" x2=\"" + fmt("%.1f", px(t)) + "\" y1=\"" +
             std::to_string(kTop) + "\" y2=\"" + fmt("%.1f", kTop + ph) +
             "\" class=\"grid\"/><text x=\"" + fmt("%.1f", px(t)) + "\" y=\"" +
             fmt("%.1f", kTop + ph + 14) + "\" text-anchor=\"middle\" class=\"tick\">" +
             tick_label(t) + "</text>";
    for (double t : nice_ticks(yr.lo, yr.hi, 5))
        o += "<line x1=\"" + std::to_string(kLeft) + "\" x2=\"" + fmt("%.1f", kLeft + pw) +
             "\" y1=\"" + fmt("%.1f", pyt(t)) + "\" y2=\"" + fmt("%.1f", pyt(t)) +
             "\" class=\"grid\"/><text x=\"" + std::to_string(kLeft - 4) + "\" y=\"" +
             fmt("%.1f", pyt(t) + 4) + "\" text-anchor=\"end\" class=\"tick\">" +
             tick_label(p.log_y ? std::pow(10.0, t) : t) + "</text>";
    int legend_y = kTop + 14;
    for (const Series& s : p.series) {
        std::string pts, marks;
        int n = 0;
        for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
            if (!usable(s.x[i], s.y[i])) continue;
            const std::string X = fmt("%.1f", px(s.x[i])), Y = fmt("%.1f", py(s.y[i]));
            pts += X + "," + Y + " ";
            if (s.markers)
                marks += "<circle cx=\"" + X + "\" cy=\"" + Y + "\" r=\"3\" fill=\"" + s.color +
                         "\"><title>" + xml_escape(s.name) + " " + tick_label(s.x[i]) + ": " +
                         fmt("%.5g", s.y[i]) + "</title></circle>";
            ++n;
        }
        o += "<polyline class=\"series\" data-series=\"" + xml_escape(s.name) +
             "\" data-points=\"" + std::to_string(n) + "\" fill=\"none\" stroke=\"" + s.color +
             "\" stroke-width=\"1.5\" points=\"" + pts + "\"/>" + marks;
        o += "<text x=\"" + fmt("%.0f", kLeft + pw - 8) + "\" y=\"" + std::to_string(legend_y) +
             "\" text-anchor=\"end\" class=\"legend\" fill=\"" + s.color + "\">" +
             xml_escape(s.name) + "</text>";
        legend_y += 14;
    }
    return o + "</svg>";
}

std::string render_heatmap(const Heatmap& hm, int w, int h) {
    const int rows = static_cast<int>(hm.row_names.size());
    const int cols = static_cast<int>(hm.column_x.size());
    if (h <= 0)
        h = kTop + kBottom + 24 +
            std::max(1, rows) * std::max(8, std::min(18, 200 / std::max(1, rows)));
    std::string o = svg_open(w, h, hm.title);
    o += axis_labels(w, h, hm.x_label, hm.y_label);
    const double pw = w - kLeft - kRight, ph = h - kTop - kBottom - 24;
    if (rows == 0 || cols == 0) return o + "</svg>";
    const double cw = pw / cols, rh = ph / rows;
    // White (no rows) -> blue -> dark red (at vmax), so starved and overloaded experts both
    // stand out.
    auto color = [&](double v) {
        double t = std::clamp(hm.vmax > 0 ? v / hm.vmax : 0.0, 0.0, 1.0);
        double r, g, b;
        if (t < 0.5) {
            double u = t / 0.5;
            r = 255 + (49 - 255) * u, g = 255 + (130 - 255) * u, b = 255 + (189 - 255) * u;
        } else {
            double u = (t - 0.5) / 0.5;
            r = 49 + (165 - 49) * u, g = 130 + (0 - 130) * u, b = 189 + (38 - 189) * u;
        }
        char buf[16];
        std::snprintf(buf, sizeof buf, "#%02x%02x%02x", static_cast<int>(r), static_cast<int>(g),
                      static_cast<int>(b));
        return std::string(buf);
    };
    o += "<g class=\"cells\" data-rows=\"" + std::to_string(rows) + "\" data-columns=\"" +
         std::to_string(cols) + "\">";
    for (int r = 0; r < rows; ++r)
        for (int c = 0; c < cols; ++c) {
            const double v = hm.values[r][c];
            o += "<rect class=\"cell\" x=\"" + fmt("%.2f", kLeft + c * cw) + "\" y=\"" +
                 fmt("%.2f", kTop + r * rh) + "\" width=\"" + fmt("%.2f", cw + 0.05) +
                 "\" height=\"" + fmt("%.2f", rh + 0.05) + "\" fill=\"" + color(v) + "\"><title>" +
                 xml_escape(hm.row_names[r]) + ", step " + tick_label(hm.column_x[c]) + ": " +
                 fmt("%.3f", v) + "</title></rect>";
        }
    o += "</g>";
    for (int r = 0; r < rows; ++r)
        if (rows <= 32 || r % (rows / 16) == 0)
            o += "<text x=\"" + std::to_string(kLeft - 4) + "\" y=\"" +
                 fmt("%.1f", kTop + (r + 0.5) * rh + 4) + "\" text-anchor=\"end\" class=\"tick\">" +
                 xml_escape(hm.row_names[r]) + "</text>";
    const double x0 = hm.column_x.front(), x1 = hm.column_x.back();
    for (double t : nice_ticks(x0, x1, 6)) {
        const double x = kLeft + (x1 > x0 ? (t - x0) / (x1 - x0) * (pw - cw) + cw / 2 : pw / 2);
        o += "<text x=\"" + fmt("%.1f", x) + "\" y=\"" + fmt("%.1f", kTop + ph + 14) +
             "\" text-anchor=\"middle\" class=\"tick\">" + tick_label(t) + "</text>";
    }
    // Legend: a 0..vmax gradient bar under the map.
    const double ly = kTop + ph + 20, lw = 160, lx = kLeft + pw - lw - 36;
    for (int i = 0; i < 32; ++i)
        o += "<rect x=\"" + fmt("%.1f", lx + i * lw / 32) + "\" y=\"" + fmt("%.1f", ly) +
             "\" width=\"" + fmt("%.2f", lw / 32 + 0.1) + "\" height=\"8\" fill=\"" +
             color(hm.vmax * i / 31) + "\"/>";
    o += "<text x=\"" + fmt("%.1f", lx - 6) + "\" y=\"" + fmt("%.1f", ly + 8) +
         "\" text-anchor=\"end\" class=\"tick\">" + xml_escape(hm.value_label) + " 0</text>";
    o += "<text x=\"" + fmt("%.1f", lx + lw + 4) + "\" y=\"" + fmt("%.1f", ly + 8) +
         "\" class=\"tick\">" + tick_label(hm.vmax) + "</text>";
    return o + "</svg>";
}

}  // namespace moetrain::cli
