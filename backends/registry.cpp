// The backend registry: the built-in cpu backend plus modules found on disk and loaded with
// dlopen on first use. A module that fails to load is listed with the loader's reason.
#include <dirent.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>

#include "cpu/cpu_backend.h"
#include "module_dirs.h"
#include "moetrain/backend.h"

namespace moetrain {

static std::string library_dir() {
    Dl_info info;
    if (dladdr(reinterpret_cast<void*>(&library_dir), &info) && info.dli_fname) {
        std::string p = info.dli_fname;
        auto slash = p.rfind('/');
        return slash == std::string::npos ? "." : p.substr(0, slash);
    }
    return ".";
}

std::vector<std::string> module_search_dirs() {
    std::vector<std::string> dirs;
    if (const char* env = std::getenv("MOETRAIN_BACKEND_PATH")) {
        std::string s = env;
        size_t start = 0;
        while (start <= s.size()) {
            size_t end = s.find(':', start);
            if (end == std::string::npos) end = s.size();
            if (end > start) dirs.push_back(s.substr(start, end - start));
            start = end + 1;
        }
    }
    dirs.push_back(library_dir());
    return dirs;
}

namespace {

const char* kPrefix = MOETRAIN_MODULE_PREFIX;  // "libmoetrain_backend_"
const std::vector<std::string> kKnown = {"cpu", "opencl", "cuda"};

struct Entry {
    std::string name;
    std::string path;  // module file ("" = built in or not found)
    bool tried = false;
    Backend* backend = nullptr;  // owned for the life of the process (modules never unloaded)
    std::string reason;
};

class Registry {
  public:
    static Registry& get() {
        static Registry r;
        return r;
    }

    std::vector<Entry*> entries() {
        std::lock_guard<std::mutex> lock(mu_);
        std::vector<Entry*> out;
        out.reserve(order_.size());
        for (auto& e : order_) out.push_back(&entries_[e]);
        return out;
    }

    Entry* find(const std::string& name) {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = entries_.find(name);
        return it == entries_.end() ? nullptr : &it->second;
    }

    // Loads the module on first use; afterwards e.backend or e.reason is set.
    void load(Entry& e) {
        std::lock_guard<std::mutex> lock(mu_);
        if (e.tried) return;
        e.tried = true;
        if (e.name == "cpu") {
            e.backend = create_cpu_backend();
            return;
        }
        if (e.path.empty()) {
            std::string dirs;
            for (auto& d : dirs_) dirs += (dirs.empty() ? "" : ", ") + d;
            e.reason = "not built (no " + std::string(kPrefix) + e.name + ".so in " + dirs +
                       "; configure with -DMOETRAIN_WITH_" + upper(e.name) + "=ON)";
            return;
        }
        void* h = dlopen(e.path.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            const char* err = dlerror();
            e.reason = std::string("cannot load module: ") + (err ? err : e.path);
            return;
        }
        using EntryFn = Backend* (*)(int);
        auto fn = reinterpret_cast<EntryFn>(dlsym(h, "moetrain_backend_entry"));
        if (!fn) {
            e.reason = "module " + e.path + " has no moetrain_backend_entry symbol";
            return;
        }
        e.backend = fn(MOETRAIN_BACKEND_ABI);
        if (!e.backend)
            e.reason = "module " + e.path + " was built for another moetrain backend ABI";
    }

  private:
    static std::string upper(std::string s) {
        for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        return s;
    }

    Registry() {
        for (auto& n : kKnown) add(n, "");
        dirs_ = module_search_dirs();
        std::string prefix = kPrefix;
        for (auto& dir : dirs_) {
            DIR* d = opendir(dir.c_str());
            if (!d) continue;
            std::vector<std::string> files;
            while (dirent* de = readdir(d)) files.push_back(de->d_name);
            closedir(d);
            std::sort(files.begin(), files.end());
            for (auto& f : files) {
                if (f.rfind(prefix, 0) != 0 || f.size() <= prefix.size() + 3 ||
                    f.compare(f.size() - 3, 3, ".so") != 0)
                    continue;
                std::string name = f.substr(prefix.size(), f.size() - prefix.size() - 3);
                if (name == "cpu") continue;
                auto it = entries_.find(name);
                if (it == entries_.end())
                    add(name, dir + "/" + f);
                else if (it->second.path.empty())
                    it->second.path = dir + "/" + f;
            }
        }
    }
    void add(const std::string& name, const std::string& path) {
        entries_[name] = Entry{name, path, false, nullptr, ""};
        order_.push_back(name);
    }

    std::mutex mu_;
    std::map<std::string, Entry> entries_;
    std::vector<std::string> order_;
    std::vector<std::string> dirs_;
};

}  // namespace

std::vector<BackendStatus> list_backends() {
    auto& reg = Registry::get();
    std::vector<BackendStatus> out;
    for (Entry* e : reg.entries()) {
        reg.load(*e);
        BackendStatus s;
        s.name = e->name;
        s.module_path = e->path;
        s.loaded = e->backend != nullptr;
        s.reason = e->reason;
        if (e->backend) {
            try {
                s.reason = e->backend->unavailable_reason();
                s.devices = e->backend->devices();
            } catch (const std::exception& ex) {
                s.reason = ex.what();
            }
        }
        out.push_back(std::move(s));
    }
    return out;
}

namespace {

// The usable backend a device spec ("cpu", "opencl:1") names, loaded, with its devices and the
// index asked for (-1: the backend's default device). Throws one line naming what is wrong.
struct ResolvedDevice {
    Backend* backend = nullptr;
    std::vector<DeviceInfo> devices;
    int index = -1;
};

ResolvedDevice resolve_device(const std::string& spec) {
    std::string name = spec;
    ResolvedDevice r;
    auto colon = spec.find(':');
    if (colon != std::string::npos) {
        name = spec.substr(0, colon);
        std::string idx = spec.substr(colon + 1);
        MT_CHECK(
            !idx.empty() && idx.size() < 6 &&
                std::all_of(idx.begin(), idx.end(), [](char c) { return c >= '0' && c <= '9'; }),
            "bad device '", spec, "': expected NAME or NAME:INDEX, e.g. opencl:0");
        r.index = std::stoi(idx);
    }
    auto& reg = Registry::get();
    Entry* e = reg.find(name);
    if (!e) {
        std::string known;
        for (Entry* x : reg.entries()) known += (known.empty() ? "" : ", ") + x->name;
        fail("unknown device '", spec, "' (backends: ", known, ")");
    }
    reg.load(*e);
    MT_CHECK(e->backend, "device '", spec, "' is not available: ", name, " backend ", e->reason);
    std::string why = e->backend->unavailable_reason();
    MT_CHECK(why.empty(), "device '", spec, "' is not available: ", why);
    r.backend = e->backend;
    r.devices = e->backend->devices();
    if (r.index >= 0) {
        MT_CHECK(r.index < static_cast<int>(r.devices.size()), "device '", spec,
                 "' does not exist (", name, " has ", r.devices.size(), " device",
                 r.devices.size() == 1 ? "" : "s", ")");
        MT_CHECK(r.devices[r.index].available, "device '", spec,
                 "' is not available: ", r.devices[r.index].reason);
    }
    return r;
}

}  // namespace

std::unique_ptr<Device> open_device(const std::string& spec, const DeviceOptions& opts) {
    const ResolvedDevice r = resolve_device(spec);
    return r.backend->open(r.index, opts);
}

DeviceInfo device_info(const std::string& spec) {
    const ResolvedDevice r = resolve_device(spec);
    const int index = r.index >= 0 ? r.index : r.backend->default_device();  // as open_device
    if (index < 0) fail("device '", spec, "' is not available: no usable device");
    return r.devices[static_cast<size_t>(index)];
}

}  // namespace moetrain
