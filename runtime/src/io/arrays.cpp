//===- arrays.cpp - element types, .npy and safetensors files --------------===//
#include "dsrt/dsrt.h"
#include "dsrt/io.h"

#include <cerrno>
#include <cstring>

namespace dsrt::io {

namespace {
struct DtypeNames {
  int32_t dtype;
  const char *name;
  const char *safetensors;
  size_t bytes;
};
/// dsrt.h's element types, and the types only files hold.
const DtypeNames kNames[] = {
#define DSRT_DTYPE_NAMES_(e, name, bytes, safetensors) {e, #name, #safetensors, bytes},
    DSRT_DTYPES(DSRT_DTYPE_NAMES_)
#undef DSRT_DTYPE_NAMES_
    {kU8, "u8", "U8", 1},
    {kI8, "i8", "I8", 1},
    {kI16, "i16", "I16", 2},
};
} // namespace

size_t elementSize(int32_t dtype) {
  for (const auto &n : kNames)
    if (n.dtype == dtype)
      return n.bytes;
  return 0;
}

const char *dtypeName(int32_t dtype) {
  for (const auto &n : kNames)
    if (n.dtype == dtype)
      return n.name;
  return "?";
}

int32_t dtypeFromName(const std::string &name) {
  for (const auto &n : kNames)
    if (name == n.name)
      return n.dtype;
  return -1;
}

int32_t dtypeFromSafetensors(const std::string &name) {
  for (const auto &n : kNames)
    if (name == n.safetensors)
      return n.dtype;
  return -1;
}

const char *dtypeToSafetensors(int32_t dtype) {
  for (const auto &n : kNames)
    if (n.dtype == dtype)
      return n.safetensors;
  return "";
}

int64_t Array::numel() const {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

std::string formatDims(const std::vector<int64_t> &dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i)
    s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

std::string Array::describe() const { return formatDims(dims) + " " + dtypeName(dtype); }

//===----------------------------------------------------------------------===//
// .npy
//===----------------------------------------------------------------------===//

namespace {

/// Parses the Python dict literal of an .npy header: 'descr', 'fortran_order', 'shape'.
bool parseNpyHeader(const std::string &h, std::string &descr, bool &fortran,
                    std::vector<int64_t> &shape, std::string &cause) {
  auto valueOf = [&](const char *key, size_t &at) {
    std::string k1 = std::string("'") + key + "'", k2 = std::string("\"") + key + "\"";
    size_t p = h.find(k1);
    if (p == std::string::npos)
      p = h.find(k2);
    if (p == std::string::npos)
      return false;
    p = h.find(':', p + k1.size());
    if (p == std::string::npos)
      return false;
    ++p;
    while (p < h.size() && h[p] == ' ')
      ++p;
    at = p;
    return true;
  };
  size_t p;
  if (!valueOf("descr", p) || (h[p] != '\'' && h[p] != '"')) {
    cause = "header has no 'descr'";
    return false;
  }
  size_t e = h.find(h[p], p + 1);
  if (e == std::string::npos) {
    cause = "malformed 'descr'";
    return false;
  }
  descr = h.substr(p + 1, e - p - 1);
  if (!valueOf("fortran_order", p)) {
    cause = "header has no 'fortran_order'";
    return false;
  }
  fortran = h.compare(p, 4, "True") == 0;
  if (!valueOf("shape", p) || h[p] != '(') {
    cause = "header has no 'shape'";
    return false;
  }
  e = h.find(')', p);
  if (e == std::string::npos) {
    cause = "malformed 'shape'";
    return false;
  }
  shape.clear();
  std::string body = h.substr(p + 1, e - p - 1);
  size_t i = 0;
  while (i < body.size()) {
    while (i < body.size() && (body[i] == ' ' || body[i] == ','))
      ++i;
    if (i >= body.size())
      break;
    size_t j = i;
    while (j < body.size() && body[j] >= '0' && body[j] <= '9')
      ++j;
    if (j == i) {
      cause = "malformed 'shape' (" + body + ")";
      return false;
    }
    int64_t d = 0;
    for (size_t k = i; k < j; ++k)
      if (!checkedMul(d, 10, d) || !checkedAdd(d, body[k] - '0', d)) {
        cause = "dimension " + body.substr(i, j - i) + " of 'shape' is too large";
        return false;
      }
    shape.push_back(d);
    i = j;
    while (i < body.size() && body[i] == 'L') // Python 2 longs
      ++i;
  }
  return true;
}

int32_t dtypeFromDescr(const std::string &d) {
  if (d == "<f4") return DSRT_F32;
  if (d == "<f8") return DSRT_F64;
  if (d == "<i8") return DSRT_I64;
  if (d == "<i4") return DSRT_I32;
  if (d == "<f2") return DSRT_F16;
  if (d == "|b1") return DSRT_I1;
  if (d == "|u1" || d == "<u1") return kU8;
  return -1;
}

const char *descrOf(int32_t dtype) {
  switch (dtype) {
  case DSRT_F32: return "<f4";
  case DSRT_F64: return "<f8";
  case DSRT_I64: return "<i8";
  case DSRT_I32: return "<i4";
  case DSRT_F16: return "<f2";
  case DSRT_I1: return "|b1";
  case kU8: return "|u1";
  default: return nullptr;
  }
}

} // namespace

bool readNpy(const std::string &path, Array &out, std::string &err) {
  std::string bytes;
  if (!readFile(path, bytes, err))
    return false;
  return parseNpy(bytes, path, out, err);
}

bool parseNpy(const std::string &bytes, const std::string &path, Array &out, std::string &err) {
  auto bad = [&](const std::string &cause) {
    err = "'" + path + "' is not a usable .npy file: " + cause;
    return false;
  };
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0)
    return bad("missing the \\x93NUMPY magic (write it with numpy.save)");
  int major = static_cast<unsigned char>(bytes[6]);
  size_t headerLen, headerStart;
  auto u8 = [&](size_t i) { return static_cast<size_t>(static_cast<unsigned char>(bytes[i])); };
  if (major == 1) {
    headerLen = u8(8) | (u8(9) << 8);
    headerStart = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12)
      return bad("truncated header");
    headerLen = u8(8) | (u8(9) << 8) | (u8(10) << 16) | (u8(11) << 24);
    headerStart = 12;
  } else {
    return bad("unsupported format version " + std::to_string(major));
  }
  if (headerLen > bytes.size() - headerStart)
    return bad("truncated header");
  std::string header = bytes.substr(headerStart, headerLen);
  std::string descr, cause;
  bool fortran = false;
  std::vector<int64_t> shape;
  if (!parseNpyHeader(header, descr, fortran, shape, cause))
    return bad(cause);
  if (fortran)
    return bad("Fortran order; save a C-order array (numpy.ascontiguousarray)");
  int32_t dtype = dtypeFromDescr(descr);
  if (dtype < 0)
    return bad("element type '" + descr +
               "' is not supported (use <f4 <f8 <i8 <i4 <f2 |b1 |u1, little-endian)");
  int64_t numel = 0, needBytes = 0;
  if (!checkedNumel(shape, numel) || !checkedBytes(numel, dtype, needBytes))
    return bad("shape " + formatDims(shape) + " has more elements than a file can hold");
  out.dtype = dtype;
  out.dims = shape;
  size_t need = static_cast<size_t>(needBytes);
  size_t dataStart = headerStart + headerLen;
  if (bytes.size() - dataStart < need)
    return bad("data is truncated (" + std::to_string(bytes.size() - dataStart) +
               " bytes, shape " + formatDims(shape) + " needs " + std::to_string(need) + ")");
  out.data.assign(bytes.begin() + dataStart, bytes.begin() + dataStart + need);
  return true;
}

bool writeNpy(const std::string &path, const Array &a, std::string &err) {
  const char *descr = descrOf(a.dtype);
  if (!descr) {
    err = "cannot write '" + path + "': element type " + dtypeName(a.dtype) +
          " has no .npy spelling";
    return false;
  }
  std::string shape = "(";
  for (size_t i = 0; i < a.dims.size(); ++i)
    shape += std::to_string(a.dims[i]) + (a.dims.size() == 1 || i + 1 < a.dims.size() ? "," : "");
  shape += ")";
  std::string header = std::string("{'descr': '") + descr +
                       "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + header.size() + 1) % 64)
    header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += char(1);
  out += char(0);
  out += char(header.size() & 0xff);
  out += char((header.size() >> 8) & 0xff);
  out += header;
  std::FILE *f = std::fopen(path.c_str(), "wb");
  if (!f) {
    err = "cannot write '" + path + "': " + std::strerror(errno);
    return false;
  }
  bool ok = std::fwrite(out.data(), 1, out.size(), f) == out.size() &&
            (a.data.empty() || std::fwrite(a.data.data(), 1, a.data.size(), f) == a.data.size());
  ok = std::fclose(f) == 0 && ok;
  if (!ok)
    err = "cannot write '" + path + "': " + std::strerror(errno);
  return ok;
}

//===----------------------------------------------------------------------===//
// safetensors
//===----------------------------------------------------------------------===//

bool parseSafetensorsHeader(const std::string &head, uint64_t fileSize, const std::string &path,
                            std::vector<SafetensorsEntryInfo> &out, uint64_t &headerBytes,
                            std::string &err) {
  auto bad = [&](const std::string &cause) {
    err = "'" + path + "' is not a usable safetensors file: " + cause;
    return false;
  };
  if (head.size() < 8 || fileSize < 8)
    return bad("shorter than its 8-byte header size");
  uint64_t n = 0;
  for (int k = 0; k < 8; ++k)
    n |= static_cast<uint64_t>(static_cast<unsigned char>(head[k])) << (8 * k);
  if (n > fileSize - 8 || n > head.size() - 8)
    return bad("header size " + std::to_string(n) + " exceeds the file");
  Json header;
  std::string jerr;
  if (!parseJson(head.substr(8, n), header, jerr))
    return bad("header JSON: " + jerr);
  if (!header.isObject())
    return bad("header is not a JSON object");
  headerBytes = n;
  uint64_t dataStart = 8 + n, dataSize = fileSize - dataStart;
  out.clear();
  for (const auto &m : header.members) {
    if (m.first == "__metadata__")
      continue;
    const Json &e = m.second;
    const Json *dt = e.get("dtype"), *shape = e.get("shape"), *offs = e.get("data_offsets");
    if (!dt || !dt->isString() || !shape || !shape->isArray() || !offs || !offs->isArray() ||
        offs->items.size() != 2)
      return bad("entry '" + m.first + "' lacks dtype, shape or data_offsets");
    SafetensorsEntryInfo a;
    a.name = m.first;
    a.dtype = dtypeFromSafetensors(dt->text);
    if (a.dtype < 0)
      return bad("entry '" + m.first + "' has unsupported dtype " + dt->text +
                 " (supported: F32 F64 I64 I32 BOOL BF16 F16 U8)");
    for (const Json &d : shape->items) {
      if (!d.isNumber() || !(d.number >= 0 && d.number <= 9.0e15) ||
          d.number != static_cast<double>(static_cast<int64_t>(d.number)))
        return bad("entry '" + m.first + "' has a shape that is not a list of sizes");
      a.dims.push_back(static_cast<int64_t>(d.number));
    }
    for (const Json &o : offs->items)
      if (!o.isNumber() || !(o.number >= 0 && o.number <= 9.0e18))
        return bad("entry '" + m.first + "' has data_offsets that are not byte offsets");
    uint64_t b = static_cast<uint64_t>(offs->items[0].number);
    uint64_t en = static_cast<uint64_t>(offs->items[1].number);
    int64_t numel = 0, bytes = 0;
    if (!checkedNumel(a.dims, numel) || !checkedBytes(numel, a.dtype, bytes) || b > en ||
        en > dataSize || en - b != static_cast<uint64_t>(bytes))
      return bad("entry '" + m.first + "' has data_offsets that do not match its shape " +
                 formatDims(a.dims) + " " + dt->text);
    a.begin = dataStart + b;
    a.end = dataStart + en;
    out.push_back(std::move(a));
  }
  return true;
}

bool readSafetensorsHeader(const std::string &path, std::vector<SafetensorsEntryInfo> &out,
                           std::string &err) {
  std::FILE *f = std::fopen(path.c_str(), "rb");
  if (!f) {
    err = "cannot read '" + path + "': " + std::strerror(errno);
    return false;
  }
  std::string head(8, '\0');
  bool ok = std::fread(&head[0], 1, 8, f) == 8 && std::fseek(f, 0, SEEK_END) == 0;
  long size = ok ? std::ftell(f) : -1;
  uint64_t n = 0;
  for (int k = 0; k < 8 && ok; ++k)
    n |= static_cast<uint64_t>(static_cast<unsigned char>(head[k])) << (8 * k);
  if (ok && size >= 8 && n <= static_cast<uint64_t>(size) - 8) {
    head.resize(8 + n);
    ok = std::fseek(f, 8, SEEK_SET) == 0 && std::fread(&head[8], 1, n, f) == n;
  }
  std::fclose(f);
  uint64_t headerBytes = 0;
  return parseSafetensorsHeader(head, size < 0 ? 0 : static_cast<uint64_t>(size), path, out,
                                headerBytes, err);
}

bool readSafetensors(const std::string &path, std::vector<NamedArray> &out, std::string &err) {
  std::string bytes;
  if (!readFile(path, bytes, err))
    return false;
  return parseSafetensors(bytes, path, out, err);
}

bool parseSafetensors(const std::string &bytes, const std::string &path,
                      std::vector<NamedArray> &out, std::string &err) {
  std::vector<SafetensorsEntryInfo> entries;
  uint64_t headerBytes = 0;
  if (!parseSafetensorsHeader(bytes, bytes.size(), path, entries, headerBytes, err))
    return false;
  out.clear();
  for (SafetensorsEntryInfo &e : entries) {
    Array a;
    a.dtype = e.dtype;
    a.dims = std::move(e.dims);
    a.data.assign(bytes.begin() + e.begin, bytes.begin() + e.end);
    out.emplace_back(std::move(e.name), std::move(a));
  }
  return true;
}

std::string safetensorsPrefix(const std::vector<SafetensorsEntry> &entries, const char *format) {
  std::string header = std::string("{\"__metadata__\":{\"format\":") + jsonQuote(format) + "}";
  uint64_t offset = 0;
  for (const SafetensorsEntry &e : entries) {
    header += "," + jsonQuote(e.name) + ":{\"dtype\":\"" + dtypeToSafetensors(e.dtype) +
              "\",\"shape\":[";
    for (size_t k = 0; k < e.dims.size(); ++k)
      header += (k ? "," : "") + std::to_string(e.dims[k]);
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(offset + e.bytes) + "]}";
    offset += e.bytes;
  }
  header += "}";
  while (header.size() % 8)
    header += ' ';
  std::string prefix(8, '\0');
  for (int k = 0; k < 8; ++k)
    prefix[k] = static_cast<char>((static_cast<uint64_t>(header.size()) >> (8 * k)) & 0xff);
  return prefix + header;
}

bool writeSafetensors(const std::string &path, const std::vector<SafetensorsEntry> &entries,
                      std::string &err) {
  std::string prefix = safetensorsPrefix(entries);
  std::string tmp = path + ".tmp";
  std::FILE *f = std::fopen(tmp.c_str(), "wb");
  if (!f) {
    err = "cannot write '" + tmp + "': " + std::strerror(errno);
    return false;
  }
  bool ok = std::fwrite(prefix.data(), 1, prefix.size(), f) == prefix.size();
  for (const SafetensorsEntry &e : entries)
    ok = ok && (e.bytes == 0 || std::fwrite(e.data, 1, e.bytes, f) == e.bytes);
  ok = (std::fclose(f) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    err = "cannot write '" + path + "': " + std::strerror(errno);
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

} // namespace dsrt::io
