// LD_PRELOAD shim that makes chosen file-system calls fail, for the IO fault tests
// (tests/cli/harden_tests.py). Configured by the environment:
//   MOETRAIN_FAULT_OP     write | fsync | rename | close   (which call fails)
//   MOETRAIN_FAULT_ERRNO  ENOSPC | EIO                       (the error it fails with)
//   MOETRAIN_FAULT_PATH   substring of the path the call concerns (for write / fsync /
//                         close: the file the descriptor is open on; for rename: either name)
//   MOETRAIN_FAULT_NTH    fail the N-th matching call (1-based) and every later one
// Every matching call before the N-th, and every other call, goes to libc unchanged.
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

struct Config {
    std::string op, path;
    int err = 0;
    long nth = 0;
};

const Config& config() {
    static const Config c = [] {
        Config c;
        auto env = [](const char* k) { return std::getenv(k) ? std::getenv(k) : ""; };
        c.op = env("MOETRAIN_FAULT_OP");
        c.path = env("MOETRAIN_FAULT_PATH");
        const std::string e = env("MOETRAIN_FAULT_ERRNO");
        c.err = e == "EIO" ? EIO : e == "ENOSPC" ? ENOSPC : 0;
        c.nth = std::atol(env("MOETRAIN_FAULT_NTH"));
        return c;
    }();
    return c;
}

std::atomic<long> g_matches{0};

std::string fd_path(int fd) {
    char link[64], buf[4096];
    std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = ::readlink(link, buf, sizeof buf - 1);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

// Should this call of `op` concerning `path` fail?
bool inject(const char* op, const std::string& path, const std::string& path2 = "") {
    const Config& c = config();
    if (c.err == 0 || c.nth <= 0 || c.op != op) return false;
    if (!c.path.empty() && path.find(c.path) == std::string::npos &&
        path2.find(c.path) == std::string::npos)
        return false;
    return ++g_matches >= c.nth;
}

template <typename F>
F real(const char* name) {
    return reinterpret_cast<F>(::dlsym(RTLD_NEXT, name));
}

}  // namespace

extern "C" {

ssize_t write(int fd, const void* buf, size_t n) {
    static auto f = real<ssize_t (*)(int, const void*, size_t)>("write");
    if (fd > 2 && inject("write", fd_path(fd))) {
        errno = config().err;
        return -1;
    }
    return f(fd, buf, n);
}

int fsync(int fd) {
    static auto f = real<int (*)(int)>("fsync");
    if (inject("fsync", fd_path(fd))) {
        errno = config().err;
        return -1;
    }
    return f(fd);
}

int close(int fd) {
    static auto f = real<int (*)(int)>("close");
    if (fd > 2 && inject("close", fd_path(fd))) {
        f(fd);  // the descriptor is gone either way, as after a real failed close
        errno = config().err;
        return -1;
    }
    return f(fd);
}

int rename(const char* a, const char* b) {
    static auto f = real<int (*)(const char*, const char*)>("rename");
    if (inject("rename", a, b)) {
        errno = config().err;
        return -1;
    }
    return f(a, b);
}

int renameat2(int da, const char* a, int db, const char* b, unsigned flags) {
    static auto f = real<int (*)(int, const char*, int, const char*, unsigned)>("renameat2");
    if (inject("rename", a, b)) {
        errno = config().err;
        return -1;
    }
    return f(da, a, db, b, flags);
}

}  // extern "C"
