//===- log.cpp - data order, byte sizes and the JSONL training log ----------===//
#include "dsrt/io.h"

#include <cctype>
#include <cmath>
#include <cstdlib>

namespace dsrt::io {

int64_t sampleOffset(int64_t step, int64_t rank, int64_t k, int64_t G, int64_t mb,
                     int64_t gas) {
  return (step - 1) * G + (rank * gas + k) * mb;
}

int64_t stepsThatFit(int64_t samples, int64_t G) { return G > 0 ? samples / G : 0; }

bool parseBytes(const std::string &text, uint64_t &out) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
    ++i;
  if (i == 0)
    return false;
  std::string number = text.substr(0, i), suffix = text.substr(i);
  char *end = nullptr;
  double v = std::strtod(number.c_str(), &end);
  if (!end || *end != '\0' || !std::isfinite(v))
    return false;
  double scale = 1;
  std::string s;
  for (char c : suffix)
    s += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (!s.empty() && std::string("KMGT").find(s[0]) != std::string::npos) {
    int power = static_cast<int>(std::string("KMGT").find(s[0])) + 1;
    scale = std::ldexp(1.0, 10 * power);
    s = s.substr(1);
    if (s == "IB" || s == "B")
      s.clear();
  } else if (s == "B") {
    s.clear();
  }
  if (!s.empty())
    return false;
  double bytes = v * scale;
  if (bytes >= 18446744073709551615.0 || bytes != std::floor(bytes))
    return false;
  out = static_cast<uint64_t>(bytes);
  return true;
}

std::string formatBytes(uint64_t bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  else
    std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}


std::string formatLogLine(const LogRecord &r) {
  auto u = [](uint64_t v) { return std::to_string(v); };
  std::string s = "{\"step\":" + std::to_string(r.step) + ",\"loss\":" + formatFloat(r.loss) +
                  ",\"lr\":" + formatFloat(r.lr) + ",\"step_ms\":" + formatFloat(r.stepMs) +
                  ",\"samples_per_s\":" + formatFloat(r.samplesPerS) +
                  ",\"device_peak_bytes\":" + u(r.devicePeakBytes) +
                  ",\"host_peak_bytes\":" + u(r.hostPeakBytes);
  if (r.lossScale > 0)
    s += ",\"loss_scale\":" + formatFloat(r.lossScale) +
         ",\"skipped\":" + (r.skipped ? "true" : "false");
  s += ",\"ranks\":[";
  for (size_t i = 0; i < r.ranks.size(); ++i) {
    const RankStats &k = r.ranks[i];
    s += std::string(i ? "," : "") + "{\"rank\":" + std::to_string(k.rank) +
         ",\"device_peak_bytes\":" + u(k.devicePeakBytes) +
         ",\"host_peak_bytes\":" + u(k.hostPeakBytes) +
         ",\"model_state_bytes\":" + u(k.modelStateBytes) +
         ",\"parameter_bytes\":" + u(k.parameterBytes) +
         ",\"gradient_bytes\":" + u(k.gradientBytes) +
         ",\"optimizer_state_bytes\":" + u(k.optimizerBytes);
    if (k.saved)
      s += ",\"save_host_peak_bytes\":" + u(k.saveHostPeakBytes);
    if (k.resumed)
      s += ",\"resume_host_peak_bytes\":" + u(k.resumeHostPeakBytes);
    if (k.timed)
      s += ",\"compute_ms\":" + formatFloat(k.computeMs) +
           ",\"wait_ms\":" + formatFloat(k.waitMs);
    if (k.offload)
      s += ",\"host_space_peak_bytes\":" + u(k.hostSpacePeakBytes) +
           ",\"nvme_peak_bytes\":" + u(k.nvmePeakBytes) +
           ",\"moved_bytes\":{\"device_to_host\":" + u(k.movedBytes[0]) +
           ",\"host_to_device\":" + u(k.movedBytes[1]) +
           ",\"host_to_nvme\":" + u(k.movedBytes[2]) +
           ",\"nvme_to_host\":" + u(k.movedBytes[3]) + "}" +
           ",\"stall_ms\":" + formatFloat(k.stallMs);
    if (k.offload && !k.nvmeEngine.empty())
      s += ",\"nvme_engine\":\"" + k.nvmeEngine + "\",\"disk_read_bytes\":" +
           u(k.diskReadBytes) + ",\"disk_write_bytes\":" + u(k.diskWriteBytes);
    s += "}";
  }
  return s + "]}";
}

bool writeLogLine(std::FILE *f, const LogRecord &r) {
  std::string line = formatLogLine(r) + "\n";
  bool ok = std::fwrite(line.data(), 1, line.size(), f) == line.size();
  return std::fflush(f) == 0 && ok;
}

std::string formatProgress(const LogRecord &r, int64_t steps) {
  char buf[256];
  // Without a step count (a library's steps), the step alone.
  std::string line = "step " + std::to_string(r.step);
  if (steps > 0)
    line += "/" + std::to_string(steps);
  std::snprintf(buf, sizeof buf, " loss %.6g samples/s %.1f device %s host %s", r.loss,
                r.samplesPerS, formatBytes(r.devicePeakBytes).c_str(),
                formatBytes(r.hostPeakBytes).c_str());
  line += buf;
  if (r.lossScale > 0) {
    std::snprintf(buf, sizeof buf, " loss scale %g%s", r.lossScale, r.skipped ? " (skipped)" : "");
    line += buf;
  }
  // Added after the fields scripts already read.
  std::snprintf(buf, sizeof buf, " lr %.6g", r.lr);
  return line + buf;
}

float meanLoss(const std::vector<float> &losses) {
  if (losses.empty())
    return 0.0f;
  double sum = 0;
  for (float l : losses)
    sum += static_cast<double>(l);
  return static_cast<float>(sum / static_cast<double>(losses.size()));
}

} // namespace dsrt::io
