#include "symbolize/exec_path.h"

#include <elf.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "util/safe_file.h"

namespace offcpu {
namespace {

constexpr size_t kMaxAuxv = 4096; // ~50 entries of 16 bytes on x86-64
constexpr uint64_t kPage = 4096;
constexpr size_t kCommLen = 15; // TASK_COMM_LEN less its NUL

std::string basename_of(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string read_link(const std::string &path) {
  char buf[PATH_MAX];
  ssize_t n = ::readlink(path.c_str(), buf, sizeof(buf));
  return n > 0 && static_cast<size_t>(n) < sizeof(buf)
             ? std::string(buf, static_cast<size_t>(n))
             : std::string();
}

// AT_EXECFN's address from the auxiliary vector; 0 if none.
uint64_t execfn_address(const FileReader &files, const std::string &pid_dir) {
  auto auxv = files.read(pid_dir + "/auxv", kMaxAuxv);
  if (!auxv)
    return 0;
  for (size_t at = 0; at + 2 * sizeof(uint64_t) <= auxv->size();
       at += 2 * sizeof(uint64_t)) {
    uint64_t type = 0, value = 0;
    std::memcpy(&type, auxv->data() + at, sizeof(type));
    std::memcpy(&value, auxv->data() + at + sizeof(type), sizeof(value));
    if (type == AT_NULL)
      break;
    if (type == AT_EXECFN)
      return value;
  }
  return 0;
}

// The NUL-terminated string at `addr`, read a page at a time (it sits at
// the very top of the stack: a longer read would fail), at most PATH_MAX.
std::string read_string(const FileReader &files, const std::string &mem,
                        uint64_t addr) {
  std::string out;
  while (out.size() < PATH_MAX) {
    const uint64_t chunk = kPage - addr % kPage;
    auto bytes = files.read_at(mem, addr, chunk);
    if (!bytes)
      return {};
    size_t nul = bytes->find('\0');
    out.append(*bytes, 0, nul);
    if (nul != std::string::npos)
      return out.size() < PATH_MAX ? out : std::string();
    addr += chunk;
  }
  return {};
}

} // namespace

ExecPath exec_path_of(const FileReader &files, const std::string &pid_dir,
                      int root_fd) {
  ExecPath e;
  e.mapped = read_link(pid_dir + "/exe");
  if (e.mapped.empty() || root_fd < 0)
    return e;
  // Most processes were run by their file's own name, which comm (the
  // kernel's copy of what was run, 15 bytes) shows: nothing more to read.
  auto comm = files.read(pid_dir + "/comm", 64);
  if (comm && !comm->empty() && comm->back() == '\n')
    comm->pop_back();
  if (comm && *comm == basename_of(e.mapped).substr(0, kCommLen))
    return e;
  struct stat exe {};
  if (::stat((pid_dir + "/exe").c_str(), &exe) != 0)
    return e;
  const uint64_t addr = execfn_address(files, pid_dir);
  std::string run = addr ? read_string(files, pid_dir + "/mem", addr) : "";
  if (run.empty() || basename_of(run) == basename_of(e.mapped))
    return e;
  // A name with control characters would break lines of the text report
  // (maps escapes them; this string is raw).
  for (unsigned char c : run)
    if (c < 0x20 || c == 0x7f)
      return e;
  if (run[0] != '/') { // relative to where it was run from, if still there
    while (run.rfind("./", 0) == 0)
      run.erase(0, 2);
    std::string cwd = read_link(pid_dir + "/cwd");
    if (cwd.empty() || cwd[0] != '/')
      return e;
    run = (cwd == "/" ? "" : cwd) + "/" + run;
  }
  FilePolicy policy;
  policy.follow_last_symlink = true; // the symlink run is the point
  policy.max_size = UINT64_MAX;      // opened only to be compared
  CheckedFile f = open_in_root(root_fd, run, policy);
  if (f && f.st.st_dev == exe.st_dev && f.st.st_ino == exe.st_ino)
    e.run = run;
  return e;
}

} // namespace offcpu
