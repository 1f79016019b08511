//===- plugin.cpp - devices in plugin libraries, loaded on demand ---------------===//
//
// A device whose libraries may be missing on a machine (CUDA) lives in its own shared library,
// libdsrt_NAME.so, next to libdsrt.so. It is opened only when asked for, so a runtime built
// with CUDA starts anywhere, and a missing library becomes "unavailable: REASON".
//
#include "../comm/channel.h"
#include "../core/internal.h"

#include <dlfcn.h>

#include <string>

namespace dsrt {
namespace {

/// The directory of the library holding this code (libdsrt.so), with a trailing '/'.
std::string ownDirectory() {
  Dl_info info;
  if (!dladdr(reinterpret_cast<void *>(&ownDirectory), &info) || !info.dli_fname)
    return "";
  std::string path = info.dli_fname;
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

/// The plugin's handle (opened once, never closed: its kernels outlive any one context), or
/// nullptr with dlerror's reason.
void *openPlugin(const char *name, std::string &why) {
  std::string file = "libdsrt_" + std::string(name) + ".so";
  std::string path = ownDirectory() + file;
  void *h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    why = e ? e : ("cannot open " + path);
    // "path: cannot open shared object file" when the plugin itself is absent: not built.
    if (why.find(path + ": cannot open shared object file") != std::string::npos)
      why = "not built (" + file + " is not next to libdsrt.so; configure with CUDA" +
            (std::string(name) == "nccl" ? " and NCCL" : "") + ")";
  }
  return h;
}

} // namespace

Device *createPluginDevice(const char *name, dsrt_context *ctx, std::string &why) {
  void *h = openPlugin(name, why);
  if (!h)
    return nullptr;
  std::string sym = std::string("dsrt_") + name + "_create";
  auto create = reinterpret_cast<dsrt_plugin_create_fn>(dlsym(h, sym.c_str()));
  if (!create) {
    why = "libdsrt_" + std::string(name) + ".so has no " + sym;
    return nullptr;
  }
  char buf[512] = {0};
  Device *d = create(ctx, buf, sizeof buf);
  if (!d)
    why = buf;
  return d;
}

std::unique_ptr<Channel> makePluginChannel(const char *name, std::unique_ptr<Channel> host,
                                           CommControl &control, void *stream, int ordinal,
                                           std::string &why) {
  void *h = openPlugin(name, why);
  if (!h)
    return nullptr;
  std::string sym = std::string("dsrt_") + name + "_channel_create";
  auto create = reinterpret_cast<dsrt_plugin_channel_fn>(dlsym(h, sym.c_str()));
  if (!create) {
    why = "libdsrt_" + std::string(name) + ".so has no " + sym;
    return nullptr;
  }
  char buf[512] = {0};
  Channel *c = create(host.release(), &control, stream, ordinal, buf, sizeof buf);
  if (!c)
    why = buf;
  return std::unique_ptr<Channel>(c);
}

std::string pluginReport(const char *name) {
  std::string why;
  void *h = openPlugin(name, why);
  if (!h)
    return std::string(name) + ": built no; unavailable: " + why + "\n";
  std::string sym = std::string("dsrt_") + name + "_report";
  auto report = reinterpret_cast<dsrt_plugin_report_fn>(dlsym(h, sym.c_str()));
  if (!report)
    return std::string(name) + ": unavailable: no " + sym + "\n";
  std::string out(report(nullptr, 0) + 1, '\0');
  report(out.data(), out.size());
  out.resize(out.size() - 1);
  return out;
}

} // namespace dsrt
