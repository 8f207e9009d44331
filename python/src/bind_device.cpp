// Backends and devices: what `moetrain info` lists (and why a backend or device is
// unavailable), and opening a device.
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>

#include "bindings.h"
#include "moetrain/backend.h"

namespace moetrain::python {

namespace {
nb::dict device_dict(const DeviceInfo& d) {
    nb::dict o;
    o["id"] = d.id;
    o["name"] = d.name;
    o["details"] = d.details;
    o["memory_bytes"] = d.memory_bytes;
    o["available"] = d.available;
    o["reason"] = d.reason;
    return o;
}
}  // namespace

void bind_device(nb::module_& m) {
    nb::class_<Device>(m, "Device", "An opened compute device (see open_device).")
        .def_prop_ro("backend", &Device::backend_name, "the backend: cpu, opencl or cuda")
        .def_prop_ro("name", &Device::name, "human description of the device")
        .def("__repr__", [](const Device& d) {
            return "<moetrain.Device " + d.backend_name() + ": " + d.name() + ">";
        });

    m.def(
        "list_backends",
        [] {
            nb::list out;
            for (const BackendStatus& b : list_backends()) {
                nb::dict o;
                o["name"] = b.name;
                o["module_path"] = b.module_path;
                o["loaded"] = b.loaded;
                o["reason"] = b.reason;
                nb::list devs;
                for (const DeviceInfo& d : b.devices) devs.append(device_dict(d));
                o["devices"] = devs;
                out.append(o);
            }
            return out;
        },
        nb::sig("def list_backends() -> list[dict[str, typing.Any]]"),
        "Every known backend (cpu, opencl, cuda, ...): name, module_path, loaded, reason (why "
        "not usable) and devices (id, name, details, memory_bytes, available, reason).");

    m.def(
        "device_info", [](const std::string& spec) { return device_dict(device_info(spec)); },
        nb::arg("spec"), nb::sig("def device_info(spec: str) -> dict[str, typing.Any]"),
        "What `moetrain info` lists for the device `spec` names, without opening it.");

    m.def(
        "open_device",
        [](const std::string& spec, int threads, bool cuda_graphs) {
            DeviceOptions o;
            o.threads = threads;
            o.cuda_graphs = cuda_graphs;
            return open_device(spec, o);
        },
        nb::arg("spec") = "cpu", nb::arg("threads") = 0, nb::arg("cuda_graphs") = true,
        "Open \"cpu\", \"opencl\", \"opencl:1\", \"cuda:0\"...; raises moetrain.Error naming "
        "the reason when the device is not available (never falls back to another).");
}

}  // namespace moetrain::python
