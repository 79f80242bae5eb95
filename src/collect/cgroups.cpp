#include "collect/cgroups.h"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include <algorithm>
#include <memory>
#include <set>

#include "util/error.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

namespace offcpu {
namespace {

// A walk of a huge hierarchy stops here.
constexpr size_t kMaxCgroups = 100000;
constexpr int kMaxDepth = 32;

struct DirCloser {
  void operator()(DIR *d) const { closedir(d); }
};

bool is_cgroup2(const std::string &path) {
  struct statfs fs {};
  return statfs(path.c_str(), &fs) == 0 &&
         static_cast<unsigned long>(fs.f_type) == CGROUP2_SUPER_MAGIC;
}

void walk(const std::string &root, const std::string &rel, int depth,
          const std::set<uint64_t> &want, std::map<uint64_t, std::string> &out,
          size_t &visited) {
  if (depth > kMaxDepth || visited++ > kMaxCgroups || out.size() == want.size())
    return;
  std::unique_ptr<DIR, DirCloser> dir(opendir((root + rel).c_str()));
  if (!dir)
    return;
  while (dirent *e = readdir(dir.get())) {
    if (e->d_type != DT_DIR || e->d_name[0] == '.')
      continue;
    std::string child = rel + "/" + e->d_name;
    if (want.count(e->d_ino))
      out[e->d_ino] = child;
    walk(root, child, depth + 1, want, out, visited);
  }
}

} // namespace

std::string cgroup2_root() {
  for (const char *p : {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"})
    if (is_cgroup2(p))
      return p;
  return "/sys/fs/cgroup";
}

uint64_t cgroup_id(const std::string &path) {
  const std::string root = cgroup2_root();
  // A cgroup2 directory as given, else a path inside the cgroup2 mount.
  std::string full = path;
  if (path.empty() || path[0] != '/' || !is_cgroup2(path))
    full = root + (path.empty() || path[0] != '/' ? "/" : "") + path;
  struct stat st {};
  if (stat(full.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || !is_cgroup2(full))
    throw usage_error("--cgroup: " + path + " is not a cgroup v2 directory (" +
                      full + ")");
  return static_cast<uint64_t>(st.st_ino);
}

std::map<uint64_t, std::string> cgroup_paths(const std::vector<uint64_t> &ids) {
  std::map<uint64_t, std::string> out;
  std::set<uint64_t> want(ids.begin(), ids.end());
  const std::string root = cgroup2_root();
  struct stat st {};
  if (stat(root.c_str(), &st) == 0 && want.count(st.st_ino))
    out[st.st_ino] = "/";
  size_t visited = 0;
  walk(root, "", 0, want, out, visited);
  return out;
}

std::string cgroup_label(const std::string &path) {
  size_t slash = path.rfind('/');
  std::string last = slash == std::string::npos ? path : path.substr(slash + 1);
  for (const char *unit : {".service", ".scope", ".slice", ".socket"}) {
    size_t n = std::char_traits<char>::length(unit);
    if (last.size() > n && last.compare(last.size() - n, n, unit) == 0)
      return last;
  }
  return path;
}

} // namespace offcpu
