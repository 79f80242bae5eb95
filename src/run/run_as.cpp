#include "run/run_as.h"

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "util/error.h"

namespace offcpu {
namespace {

// The supplementary groups a login of `name` gets, with `gid` first. One
// retry with the size getgrouplist asks for; a user in more groups than
// the kernel allows gets the kernel's maximum.
std::vector<gid_t> groups_of(const std::string &name, gid_t gid) {
  std::vector<gid_t> groups(64);
  for (int attempt = 0; attempt < 2; attempt++) {
    int n = static_cast<int>(groups.size());
    if (getgrouplist(name.c_str(), gid, groups.data(), &n) >= 0) {
      groups.resize(static_cast<size_t>(n));
      return groups;
    }
    groups.resize(static_cast<size_t>(std::min(n, 65536)));
  }
  return {gid};
}

// Fills what the passwd entry of `as.uid` says, or what sudo makes up for a
// uid that has none.
void describe_user(RunAs &as, const passwd *pw) {
  if (pw) {
    as.name = pw->pw_name;
    as.home = pw->pw_dir;
    as.shell = pw->pw_shell && *pw->pw_shell ? pw->pw_shell : "/bin/sh";
    as.groups = groups_of(as.name, as.gid);
  } else {
    as.name = "#" + std::to_string(as.uid);
    as.home = "/";
    as.shell = "/bin/sh";
    as.groups = {as.gid};
  }
}

gid_t group_id(const std::string &group) {
  uint32_t id = 0;
  if (parse_numeric_id(group.c_str(), id))
    return id; // a gid needs no group entry: the caller named it exactly
  if (const struct group *gr = getgrnam(group.c_str()))
    return gr->gr_gid;
  throw usage_error("--group: no such group '" + group + "'");
}

// SUDO_UID and SUDO_GID are set together by sudo. Anything else is not
// sudo's doing, and guessing (running as root) would be the worst answer.
void sudo_ids(const RunAsRequest &r, uid_t &uid, gid_t &gid) {
  if (!r.sudo_uid || !r.sudo_gid)
    throw usage_error(
        std::string(r.sudo_uid ? "SUDO_UID is set but SUDO_GID is not"
                               : "SUDO_GID is set but SUDO_UID is not") +
        ": cannot tell who the command is to run as (give --user, or unset "
        "both)");
  uint32_t u = 0, g = 0;
  if (!parse_numeric_id(r.sudo_uid, u))
    throw usage_error(std::string("SUDO_UID='") + r.sudo_uid +
                      "' is not a user id: cannot tell who the command is to "
                      "run as (give --user)");
  if (!parse_numeric_id(r.sudo_gid, g))
    throw usage_error(std::string("SUDO_GID='") + r.sudo_gid +
                      "' is not a group id: cannot tell who the command is "
                      "to run as (give --user)");
  uid = u;
  gid = g;
}

} // namespace

bool parse_numeric_id(const char *text, uint32_t &id) {
  if (!text || !*text || std::strlen(text) > 10)
    return false;
  uint64_t v = 0;
  for (const char *c = text; *c; c++) {
    if (*c < '0' || *c > '9')
      return false;
    v = v * 10 + static_cast<uint64_t>(*c - '0');
  }
  if (v >= 0xffffffffu) // (uid_t)-1 leaves an id unchanged: never an id
    return false;
  id = static_cast<uint32_t>(v);
  return true;
}

RunAs resolve_run_as(const RunAsRequest &r) {
  RunAs as;
  const passwd *pw = nullptr;
  if (!r.user.empty()) {
    uint32_t id = 0;
    const bool numeric = parse_numeric_id(r.user.c_str(), id);
    pw = numeric ? getpwuid(id) : getpwnam(r.user.c_str());
    if (!pw && !numeric)
      throw usage_error("--user: no such user '" + r.user + "'");
    if (!pw && r.group.empty())
      throw usage_error("--user " + r.user +
                        ": no passwd entry for this uid, so no group to run "
                        "with; give it with --group");
    as.uid = pw ? pw->pw_uid : id;
    as.gid = pw ? pw->pw_gid : 0;
  } else if (r.sudo_uid || r.sudo_gid) {
    sudo_ids(r, as.uid, as.gid);
    pw = getpwuid(as.uid);
  } else {
    as.uid = r.self_uid;
    as.gid = r.self_gid;
    pw = getpwuid(as.uid);
  }
  if (!r.group.empty())
    as.gid = group_id(r.group);
  describe_user(as, pw);
  return as;
}

RunAs command_user(const std::string &user, const std::string &group) {
  RunAsRequest r;
  r.user = user;
  r.group = group;
  r.sudo_uid = getenv("SUDO_UID");
  r.sudo_gid = getenv("SUDO_GID");
  r.self_uid = getuid();
  r.self_gid = getgid();
  return resolve_run_as(r);
}

std::vector<std::string> command_environment(const RunAs &as,
                                             const char *const *env) {
  static const char *const kOwn[] = {"HOME=", "USER=", "LOGNAME=", "SHELL="};
  std::vector<std::string> out;
  for (const char *const *e = env; e && *e; e++) {
    bool own = false;
    for (const char *prefix : kOwn)
      own = own || std::strncmp(*e, prefix, std::strlen(prefix)) == 0;
    if (!own)
      out.emplace_back(*e);
  }
  out.push_back("HOME=" + as.home);
  out.push_back("USER=" + as.name);
  out.push_back("LOGNAME=" + as.name);
  out.push_back("SHELL=" + as.shell);
  return out;
}

} // namespace offcpu
