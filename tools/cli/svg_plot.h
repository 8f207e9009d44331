// Static SVG charts for `moetrain report`: line plots with axes and ticks, and a heatmap. The
// output is plain markup (no script); every series is a <polyline class="series"> with a
// data-points count, so a browser test can check that a plot has data.
#pragma once

#include <string>
#include <vector>

namespace moetrain::cli {

struct Series {
    std::string name;
    std::string color;  // CSS color
    std::vector<double> x, y;
    bool markers = false;  // draw a circle at every point (sparse series such as evaluations)
};

struct LinePlot {
    std::string title, x_label, y_label;
    std::vector<Series> series;
    bool log_y = false;
};

// An <svg> element of width x height pixels; non-finite points (and y <= 0 on a log axis)
// are left out.
std::string render_line_plot(const LinePlot& p, int width = 560, int height = 300);

struct Heatmap {
    std::string title, x_label, y_label;
    std::vector<std::string> row_names;       // top to bottom
    std::vector<double> column_x;             // x value of each column (e.g. the step)
    std::vector<std::vector<double>> values;  // [row][column], in [0, vmax]
    double vmax = 1;
    std::string value_label;  // legend caption
};

std::string render_heatmap(const Heatmap& h, int width = 560, int height = 0);

// "1.5e+03"-free compact number for tick labels: 1500 -> "1500", 0.00025 -> "2.5e-4".
std::string tick_label(double v);
// Escapes &, <, >, " for HTML / SVG text.
std::string xml_escape(const std::string& s);

}  // namespace moetrain::cli
