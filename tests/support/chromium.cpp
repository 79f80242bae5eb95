#include "support/chromium.h"

#include <unistd.h>

#include <vector>

namespace offcpu::test {
namespace {

// Headless, no network of its own, its script errors on stderr.
std::vector<std::string> chromium_args(const std::string &profile_dir) {
  return {kChromium,
          "--headless",
          "--no-sandbox",
          "--disable-gpu",
          "--disable-quic",
          "--no-first-run",
          "--disable-background-networking",
          "--disable-component-update",
          "--disable-sync",
          "--user-data-dir=" + profile_dir,
          "--enable-logging=stderr",
          "--v=0"};
}

} // namespace

bool chromium_installed() {
  return access(kChromium, X_OK) == 0;
}

Screenshot chromium_screenshot(const std::string &url, const std::string &png,
                               const std::string &profile_dir, int settle_ms) {
  auto args = chromium_args(profile_dir);
  if (settle_ms)
    args.push_back("--virtual-time-budget=" + std::to_string(settle_ms));
  args.push_back("--window-size=1200,700");
  args.push_back("--screenshot=" + png);
  args.push_back(url);
  Screenshot s;
  s.log = run(args, 120).err;
  s.image = read_png(png);
  return s;
}

RunResult chromium_dom(const std::string &url, const std::string &profile_dir,
                       int settle_ms) {
  auto args = chromium_args(profile_dir);
  if (settle_ms)
    args.push_back("--virtual-time-budget=" + std::to_string(settle_ms));
  args.push_back("--dump-dom");
  args.push_back(url);
  return run(args, 120);
}

bool user_frame_blue(int r, int g, int b) {
  return b > r + 40 && b > 140 && g > 100;
}

size_t user_frame_pixels(const Image &img) {
  size_t blue = 0, pixels = img.rgb.size() / 3;
  for (size_t i = 0; i < pixels; i++)
    blue +=
        user_frame_blue(img.rgb[3 * i], img.rgb[3 * i + 1], img.rgb[3 * i + 2]);
  return blue;
}

} // namespace offcpu::test
