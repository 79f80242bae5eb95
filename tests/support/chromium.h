// Headless Chromium as the tests drive it: a screenshot of a page, the page
// after its scripts ran, and how much of a screenshot is flame-graph frames.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "support/png.h"
#include "support/process.h"

namespace offcpu::test {

inline constexpr const char *kChromium = "/usr/bin/chromium";

// Debian's package chromium is there to run.
bool chromium_installed();

struct Screenshot {
  std::optional<Image> image; // nullopt: Chromium wrote no PNG
  std::string log;            // its stderr: script errors say "Uncaught"
};

// `url` rendered in a 1200x700 window into the PNG file `png`; Chromium
// keeps its profile in `profile_dir` (one per call: a second Chromium on the
// same profile hands its work to the first). `settle_ms`: virtual time the
// page's timers get before the capture (pages that load data in steps).
Screenshot chromium_screenshot(const std::string &url, const std::string &png,
                               const std::string &profile_dir,
                               int settle_ms = 0);

// The page's DOM once its scripts ran (out), and Chromium's log (err).
RunResult chromium_dom(const std::string &url, const std::string &profile_dir,
                       int settle_ms = 0);

// A user frame's blue in offcpu's flame graph palette.
bool user_frame_blue(int r, int g, int b);
// Pixels of `img` in that blue.
size_t user_frame_pixels(const Image &img);

} // namespace offcpu::test
