//===- ExportedProgram.cpp - a torch.export program as a TorchScript module ===//
//
// The program's JSON (torch/_export/serde/schema.yaml, schema 8) is a graph of ATen op calls
// with typed arguments and a signature that maps its placeholders to state_dict names. Each
// call becomes a TorchScript node of the same operator, with every argument of its schema in
// order (omitted ones take the schema's default), so the importer's interpreter and LibTorch's
// executor (ds-reference) both run it as they run a scripted module.
//
#include "ExportedProgram.h"

#include "llvm/Support/JSON.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/jit/frontend/source_range.h>

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <regex>

using namespace mlir::ds;
namespace json = llvm::json;
using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

namespace {
/// The export schema's ScalarType codes as c10::ScalarType; -1 if ds does not read it.
int64_t scalarTypeOf(int64_t code) {
  if (code >= 1 && code <= 11)
    return code - 1; // BYTE .. COMPLEXDOUBLE
  switch (code) {
  case 12: return (int64_t)c10::ScalarType::Bool;
  case 13: return (int64_t)c10::ScalarType::BFloat16;
  default: return -1;
  }
}

struct Program {
  caffe2::serialize::PyTorchStreamReader &archive;
  std::shared_ptr<Graph> graph;
  torch::jit::Module root;
  std::shared_ptr<torch::jit::CompilationUnit> cu;
  std::map<std::string, Value *> values;       // tensor and sym-int names
  std::map<std::string, torch::jit::Module> modules; // by dotted path ("" = root)
  std::map<std::string, at::Tensor> storages;  // weight files already read, by path
  std::map<std::string, at::Tensor> views;     // tensors made, by file and view
  std::string error;
  int classCount = 0;

  bool fail(std::string msg) {
    if (error.empty())
      error = std::move(msg);
    return false;
  }

  /// The module at dotted `path`, made (with its parents) on first use.
  torch::jit::Module &moduleAt(const std::string &path) {
    auto it = modules.find(path);
    if (it != modules.end())
      return it->second;
    size_t dot = path.rfind('.');
    std::string parent = dot == std::string::npos ? "" : path.substr(0, dot);
    std::string leaf = dot == std::string::npos ? path : path.substr(dot + 1);
    torch::jit::Module &p = moduleAt(parent);
    torch::jit::Module child(
        c10::QualifiedName("__torch__.ds_export.M" + std::to_string(++classCount)), cu);
    p.register_module(leaf, child);
    return modules.emplace(path, child).first->second;
  }

  /// Reads tensor `name` of a weights or constants config entry.
  bool readTensor(const std::string &folder, const std::string &name,
                  const json::Object &entry, at::Tensor &out) {
    const json::Object *meta = entry.getObject("tensor_meta");
    auto file = entry.getString("path_name");
    if (!meta || !file)
      return fail("the entry of '" + name + "' in " + folder + " has no tensor_meta/path_name");
    if (entry.getBoolean("use_pickle").value_or(false))
      return fail("'" + name + "' is stored pickled (a tensor subclass); ds reads plain tensors");
    int64_t st = scalarTypeOf(meta->getInteger("dtype").value_or(0));
    if (st < 0)
      return fail("'" + name + "' has a dtype ds does not read (export code " +
                  std::to_string(meta->getInteger("dtype").value_or(0)) + ")");
    std::vector<int64_t> sizes, strides;
    auto ints = [&](const char *key, std::vector<int64_t> &out) {
      const json::Array *list = meta->getArray(key);
      if (!list)
        return fail("'" + name + "' has no " + key);
      for (const json::Value &v : *list) {
        auto n = v.getAsObject() ? v.getAsObject()->getInteger("as_int") : std::nullopt;
        if (!n)
          return fail("'" + name + "' has a symbolic size; ds needs static weight shapes");
        out.push_back(*n);
      }
      return true;
    };
    if (!ints("sizes", sizes) || !ints("strides", strides))
      return false;
    int64_t offset = 0;
    if (const json::Object *o = meta->getObject("storage_offset"))
      offset = o->getInteger("as_int").value_or(0);
    std::string path = folder + "/" + file->str();
    if (!archive.hasRecord(path))
      return fail("the archive has no record '" + path + "' for '" + name + "'");
    auto dtype = static_cast<c10::ScalarType>(st);
    bool empty = std::find(sizes.begin(), sizes.end(), 0) != sizes.end();
    // A weight-free export (the model on the meta device, or under FakeTensorMode) stores
    // each tensor's shape and no bytes: it becomes a meta tensor, declared by its shape alone.
    // Its storage tells no ties apart, so each name is its own tensor.
    const json::Object *device = meta->getObject("device");
    bool onMeta = device && device->getString("type") == std::optional<llvm::StringRef>("meta");
    if (!empty && (onMeta || archive.getRecordSize(path) == 0)) {
      out = at::empty(sizes, at::TensorOptions().dtype(dtype).device(at::kMeta));
      return true;
    }
    auto key = path;
    at::Tensor storage;
    auto cached = storages.find(key);
    if (cached != storages.end()) {
      storage = cached->second;
    } else {
      auto [data, bytes] = archive.getRecord(path);
      size_t element = c10::elementSize(dtype);
      storage = at::empty({(int64_t)(bytes / element)}, at::TensorOptions().dtype(dtype));
      std::memcpy(storage.data_ptr(), data.get(), bytes);
      storages[key] = storage;
    }
    int64_t needed = offset + 1; // one past the last element the view reads
    for (size_t k = 0; k < sizes.size(); ++k)
      needed += (sizes[k] - 1) * strides[k];
    if (!empty && (offset < 0 || storage.numel() < needed))
      return fail("'" + name + "' reaches past its stored bytes in " + path);
    // Tied weights: names stored as the same view of one file are one tensor.
    std::string view = path + "|" + c10::str(sizes) + "|" + c10::str(strides) + "|" +
                       std::to_string(offset);
    auto known = views.find(view);
    if (known != views.end()) {
      out = known->second;
      return true;
    }
    out = storage.as_strided(sizes, strides, offset);
    views[view] = out;
    return true;
  }

  /// A constant input of the TorchScript node.
  Value *constant(const c10::IValue &v) { return graph->insertConstant(v); }

  /// One argument of a call, converted for the schema argument `arg`.
  Value *argument(const json::Object &a, const c10::Argument &arg, const std::string &op) {
    auto bad = [&](const std::string &what) -> Value * {
      fail(op + ": argument '" + arg.name() + "' is " + what + ", which ds cannot read");
      return nullptr;
    };
    if (a.size() != 1)
      return bad("malformed");
    const auto &[kind, v] = *a.begin();
    std::string k = kind.str();
    auto tensorNamed = [&](const json::Value &t) -> Value * {
      auto *o = t.getAsObject();
      auto n = o ? o->getString("name") : std::nullopt;
      if (!n || !values.count(n->str())) {
        fail(op + ": argument '" + arg.name() + "' refers to an unknown value");
        return nullptr;
      }
      return values[n->str()];
    };
    if (k == "as_none")
      return constant(c10::IValue());
    if (k == "as_tensor")
      return tensorNamed(v);
    if (k == "as_optional_tensor") {
      auto *o = v.getAsObject();
      if (o && o->get("as_none"))
        return constant(c10::IValue());
      return o && o->get("as_tensor") ? tensorNamed(*o->get("as_tensor")) : bad("malformed");
    }
    if (k == "as_tensors" || k == "as_optional_tensors") {
      std::vector<Value *> items;
      for (const json::Value &e : *v.getAsArray()) {
        Value *item = nullptr;
        if (k == "as_tensors")
          item = tensorNamed(e);
        else if (e.getAsObject() && e.getAsObject()->get("as_none"))
          item = constant(c10::IValue());
        else if (e.getAsObject() && e.getAsObject()->get("as_tensor"))
          item = tensorNamed(*e.getAsObject()->get("as_tensor"));
        if (!item)
          return nullptr;
        items.push_back(item);
      }
      auto elem = k == "as_tensors" ? c10::TensorType::get()
                                     : c10::TypePtr(c10::OptionalType::ofTensor());
      return graph->insertNode(graph->createList(elem, items))->output();
    }
    if (k == "as_int")
      return constant(*v.getAsInteger());
    if (k == "as_float") {
      if (auto text = v.getAsString()) // JSON has no literal for these
        return *text == "Infinity"    ? constant(std::numeric_limits<double>::infinity())
               : *text == "-Infinity" ? constant(-std::numeric_limits<double>::infinity())
               : *text == "NaN"       ? constant(std::numeric_limits<double>::quiet_NaN())
                                      : bad("the float '" + text->str() + "'");
      return constant(*v.getAsNumber());
    }
    if (k == "as_bool") {
      // TorchScript's Scalar is a number; a bool Scalar (full(..., True)) is the integer.
      if (arg.type()->kind() == c10::TypeKind::NumberType)
        return constant((int64_t)*v.getAsBoolean());
      return constant(*v.getAsBoolean());
    }
    if (k == "as_string")
      return constant(v.getAsString()->str());
    if (k == "as_ints" || k == "as_floats" || k == "as_bools") {
      std::vector<int64_t> ints;
      std::vector<double> floats;
      std::vector<bool> bools;
      for (const json::Value &e : *v.getAsArray()) {
        if (k == "as_ints")
          ints.push_back(*e.getAsInteger());
        else if (k == "as_floats")
          floats.push_back(*e.getAsNumber());
        else
          bools.push_back(*e.getAsBoolean());
      }
      if (k == "as_ints")
        return constant(ints);
      if (k == "as_floats")
        return constant(floats);
      c10::List<bool> list;
      for (bool b : bools)
        list.push_back(b);
      return constant(list);
    }
    if (k == "as_sym_int" || k == "as_sym_ints") {
      auto one = [&](const json::Value &e) -> Value * {
        auto *o = e.getAsObject();
        if (o && o->getInteger("as_int"))
          return constant(*o->getInteger("as_int"));
        auto n = o ? o->getString("as_name") : std::nullopt;
        if (n && values.count(n->str()))
          return values[n->str()];
        fail(op + ": argument '" + arg.name() + "' refers to an unknown symbolic size");
        return nullptr;
      };
      if (k == "as_sym_int")
        return one(v);
      std::vector<Value *> items;
      for (const json::Value &e : *v.getAsArray()) {
        Value *item = one(e);
        if (!item)
          return nullptr;
        items.push_back(item);
      }
      return graph->insertNode(graph->createList(c10::IntType::get(), items))->output();
    }
    if (k == "as_scalar_type") {
      int64_t st = scalarTypeOf(*v.getAsInteger());
      return st < 0 ? bad("dtype code " + std::to_string(*v.getAsInteger())) : constant(st);
    }
    if (k == "as_layout")
      return *v.getAsInteger() == 7 ? constant((int64_t)c10::Layout::Strided)
                                    : bad("a sparse or mkldnn layout");
    if (k == "as_memory_format") {
      switch (*v.getAsInteger()) {
      case 1: return constant((int64_t)c10::MemoryFormat::Contiguous);
      case 2: return constant((int64_t)c10::MemoryFormat::ChannelsLast);
      case 3: return constant((int64_t)c10::MemoryFormat::ChannelsLast3d);
      case 4: return constant((int64_t)c10::MemoryFormat::Preserve);
      default: return bad("an unknown memory format");
      }
    }
    if (k == "as_device") {
      auto *o = v.getAsObject();
      auto type = o ? o->getString("type") : std::nullopt;
      // A model exported without weights names the meta device where it made tensors; ds
      // places every tensor itself.
      if (!type || (*type != "cpu" && *type != "meta"))
        return bad("a device other than the CPU (export the model on the CPU, or on the "
                   "meta device to plan it without weights)");
      return constant(c10::Device(c10::DeviceType::CPU));
    }
    return bad("'" + k + "'");
  }

  /// The model's own line among the frames PyTorch recorded (the innermost frame outside
  /// torch itself), as a source range the interpreter reports errors at.
  void setSource(Node *node, const json::Object &n) {
    const json::Object *meta = n.getObject("metadata");
    auto trace = meta ? meta->getString("stack_trace") : std::nullopt;
    if (!trace)
      return;
    static const std::regex frame(R"re(File "([^"]+)", line (\d+), in [^\n]*\n\s*([^\n]*))re");
    std::string text = trace->str();
    std::string file, code;
    size_t line = 0;
    bool chosenOutsideTorch = false;
    for (auto it = std::sregex_iterator(text.begin(), text.end(), frame);
         it != std::sregex_iterator(); ++it) {
      bool insideTorch = (*it)[1].str().find("/torch/") != std::string::npos;
      if (insideTorch && chosenOutsideTorch)
        continue;
      file = (*it)[1];
      line = std::stoul((*it)[2]);
      code = (*it)[3];
      chosenOutsideTorch = !insideTorch;
    }
    if (file.empty())
      return;
    auto source = std::make_shared<torch::jit::Source>(code, file, line);
    node->setSourceRange(torch::jit::SourceRange(source, 0, code.size()));
  }

  /// Arithmetic on symbolic sizes (a dynamic batch dimension): Python's operators, as the
  /// TorchScript ops on numbers of the same name.
  bool symbolicArithmetic(const json::Object &n, const std::string &target) {
    static const std::map<std::string, std::string> ops = {
        {"add", "aten::add"},       {"sub", "aten::sub"},      {"mul", "aten::mul"},
        {"floordiv", "aten::floordiv"}, {"truediv", "aten::div"}, {"mod", "aten::remainder"},
        {"neg", "aten::neg"},       {"pow", "aten::pow"},      {"eq", "aten::eq"},
        {"ne", "aten::ne"},         {"lt", "aten::lt"},        {"le", "aten::le"},
        {"gt", "aten::gt"},         {"ge", "aten::ge"}};
    auto it = ops.find(target.substr(strlen("_operator.")));
    if (it == ops.end())
      return fail("the program calls " + target + ", which ds cannot import (" + sourceOf(n) +
                  ")");
    std::vector<torch::jit::NamedValue> args;
    if (const json::Array *inputs = n.getArray("inputs"))
      for (const json::Value &i : *inputs) {
        const json::Object *o = i.getAsObject();
        const json::Object *a = o ? o->getObject("arg") : nullptr;
        if (!a)
          return fail(target + ": malformed argument");
        Value *v = argument(*a, c10::Argument(o->getString("name").value_or("").str(),
                                              c10::IntType::get()),
                            target);
        if (!v)
          return false;
        args.emplace_back(v);
      }
    Value *out = graph->insert(c10::Symbol::fromQualString(it->second), args);
    setSource(out->node(), n);
    if (const json::Array *outputs = n.getArray("outputs"))
      if (!outputs->empty())
        if (const json::Object *o = (*outputs)[0].getAsObject())
          for (const char *kind : {"as_sym_int", "as_sym_float", "as_sym_bool"})
            if (const json::Object *s = o->getObject(kind))
              if (auto name = s->getString("as_name"))
                values[name->str()] = out;
    return true;
  }

  /// One call of the graph.
  bool call(const json::Object &n) {
    std::string target = n.getString("target").value_or("").str();
    if (target.rfind("_operator.", 0) == 0)
      return symbolicArithmetic(n, target);
    const char *prefix = "torch.ops.";
    if (target.rfind(prefix, 0) != 0)
      return fail("the program calls " + target + ", which ds cannot import (only ATen ops)");
    std::string qualified = target.substr(strlen(prefix)); // aten.add.Tensor
    size_t dot1 = qualified.find('.'), dot2 = qualified.rfind('.');
    if (dot1 == std::string::npos || dot1 == dot2)
      return fail("the program calls " + target + ", which ds cannot import");
    std::string ns = qualified.substr(0, dot1);
    std::string name = ns + "::" + qualified.substr(dot1 + 1, dot2 - dot1 - 1);
    std::string overload = qualified.substr(dot2 + 1);
    if (overload == "default")
      overload = "";
    if (name == "aten::_assert_tensor_metadata" || name == "aten::_assert_scalar" ||
        name == "aten::sym_constrain_range_for_size")
      return true; // checks of the example's metadata; shapes are static here
    if (ns != "aten")
      ensureModelCustomOp(name);
    auto handle = c10::Dispatcher::singleton().findSchema({name, overload});
    if (!handle)
      return fail("the program calls " + target + ", which this LibTorch (" +
                  libTorchVersion() + ") does not have: it was saved by a newer "
                  "PyTorch, or uses an operator ds cannot import (" + sourceOf(n) + ")");
    const c10::FunctionSchema &schema = handle->schema();
    std::map<std::string, const json::Object *> given;
    if (const json::Array *inputs = n.getArray("inputs"))
      for (const json::Value &i : *inputs)
        if (auto *o = i.getAsObject())
          if (auto argName = o->getString("name"))
            given[argName->str()] = o->getObject("arg");
    std::vector<Value *> args;
    for (const c10::Argument &arg : schema.arguments()) {
      auto it = given.find(arg.name());
      Value *v = nullptr;
      if (it != given.end() && it->second) {
        v = argument(*it->second, arg, target);
        if (!v)
          return false;
      } else if (arg.default_value()) {
        v = constant(*arg.default_value());
      } else {
        return fail(target + ": argument '" + arg.name() + "' is missing");
      }
      args.push_back(v);
    }
    const json::Array *outputs = n.getArray("outputs");
    Node *node = graph->create(c10::Symbol::fromQualString(name), args, schema.returns().size());
    for (size_t k = 0; k < schema.returns().size(); ++k)
      node->output(k)->setType(schema.returns()[k].type());
    setSource(node, n);
    graph->insertNode(node);
    if (!node->maybeSchema())
      return fail(target + ": LibTorch does not match its own schema to these arguments");
    // Bind the results to their names; a list result (split) is unpacked.
    for (size_t k = 0; outputs && k < outputs->size() && k < node->outputs().size(); ++k) {
      const json::Object *o = (*outputs)[k].getAsObject();
      if (!o || o->size() != 1)
        continue;
      const auto &[kind, v] = *o->begin();
      if (kind == "as_tensor" || kind == "as_sym_int") {
        auto *t = v.getAsObject();
        auto nm = t ? (kind == "as_tensor" ? t->getString("name") : t->getString("as_name"))
                    : std::nullopt;
        if (nm)
          values[nm->str()] = node->output(k);
      } else if (kind == "as_tensors") {
        const json::Array *list = v.getAsArray();
        Node *unpack = graph->insertNode(graph->createListUnpack(node->output(k), list->size()));
        unpack->setSourceRange(node->sourceRange());
        for (size_t j = 0; j < list->size(); ++j)
          if (auto *t = (*list)[j].getAsObject())
            if (auto nm = t->getString("name"))
              values[nm->str()] = unpack->output(j);
      }
    }
    return true;
  }

  std::string sourceOf(const json::Object &n) {
    Node *probe = graph->create(c10::prim::Uninitialized, 0);
    setSource(probe, n);
    std::string where = "no source line recorded";
    if (auto flc = probe->sourceRange().file_line_col()) {
      auto [file, line, col] = *flc;
      where = "at " + file + ":" + std::to_string(line) + " `" + probe->sourceRange().text().str() + "`";
    }
    probe->destroy();
    return where;
  }
};

const json::Object *field(const json::Object *o, const char *name) {
  return o ? o->getObject(name) : nullptr;
}
} // namespace

namespace {
/// A placeholder of the exported graph: a parameter, buffer or constant by its state name,
/// or a user input.
struct Placeholder {
  std::string argName, stateName;
  enum { Parameter, Buffer, Constant, Input } role;
  bool persistent = true;
};

/// The export schema: ds reads version 8 (PyTorch 2.15's); "" when it is.
std::string checkSchema(const json::Object *top) {
  const json::Object *version = field(top, "schema_version");
  int64_t major = version ? version->getInteger("major").value_or(0) : 0;
  int64_t minor = version ? version->getInteger("minor").value_or(0) : 0;
  std::string producer = top ? top->getString("torch_version").value_or("unknown").str() : "";
  if (major != 8)
    return "it was saved by " + std::string(major > 8 ? "a newer" : "an older") +
           " PyTorch than ds reads (producer version " + producer + ", export schema " +
           std::to_string(major) + "." + std::to_string(minor) +
           "; ds reads schema 8, as written by PyTorch 2.15): export it with PyTorch 2.15";
  return "";
}

/// The configs of the stored tensors (data/weights and data/constants), by folder.
std::string readTensorConfigs(caffe2::serialize::PyTorchStreamReader &archive,
                              std::map<std::string, json::Value> &configs) {
  for (const char *folder : {"data/weights", "data/constants"}) {
    std::string file = std::string(folder) + "/model_" +
                       (std::string(folder) == "data/weights" ? "weights" : "constants") +
                       "_config.json";
    if (!archive.hasRecord(file))
      continue;
    auto [cdata, csize] = archive.getRecord(file);
    auto cfg = json::parse(llvm::StringRef(static_cast<const char *>(cdata.get()), csize));
    if (!cfg)
      return file + " is not valid JSON (" + llvm::toString(cfg.takeError()) + ")";
    configs.insert_or_assign(folder, std::move(*cfg));
  }
  return "";
}

/// The signature's input specs, in order.
std::string readPlaceholders(const json::Object *signature,
                             std::vector<Placeholder> &placeholders) {
  const json::Array *inputSpecs = signature->getArray("input_specs");
  if (!inputSpecs)
    return "its signature has no input_specs";
  for (const json::Value &spec : *inputSpecs) {
    const json::Object *s = spec.getAsObject();
    if (!s || s->size() != 1)
      return "its signature has a malformed input spec";
    const auto &[kind, body] = *s->begin();
    const json::Object *b = body.getAsObject();
    auto argName = [&](const json::Object *arg) {
      return arg ? arg->getString("name").value_or("").str() : std::string();
    };
    if (kind == "parameter") {
      placeholders.push_back({argName(b->getObject("arg")),
                              b->getString("parameter_name").value_or("").str(),
                              Placeholder::Parameter});
    } else if (kind == "buffer") {
      placeholders.push_back({argName(b->getObject("arg")),
                              b->getString("buffer_name").value_or("").str(),
                              Placeholder::Buffer, b->getBoolean("persistent").value_or(true)});
    } else if (kind == "tensor_constant") {
      placeholders.push_back({argName(b->getObject("arg")),
                              b->getString("tensor_constant_name").value_or("").str(),
                              Placeholder::Constant});
    } else if (kind == "user_input") {
      const json::Object *arg = b->getObject("arg");
      const json::Object *t = arg ? arg->getObject("as_tensor") : nullptr;
      if (!t)
        return "its forward takes a non-tensor input (" +
               (arg && !arg->empty() ? arg->begin()->first.str() : std::string("?")) +
               "); ds imports programs whose inputs are all tensors";
      placeholders.push_back({argName(t), "", Placeholder::Input});
    } else {
      return "its signature has a '" + kind.str() + "' input, which ds cannot import";
    }
  }
  return "";
}

/// A state name's module path and attribute ("h.0.ln.weight" -> "h.0.ln", "weight").
std::pair<std::string, std::string> ownerAndLeaf(const std::string &stateName) {
  size_t dot = stateName.rfind('.');
  if (dot == std::string::npos)
    return {"", stateName};
  return {stateName.substr(0, dot), stateName.substr(dot + 1)};
}

/// State: parameters, buffers and constants, registered on the program's modules (a
/// parameter's requires_grad as exported: a frozen parameter is not trained).
std::string registerState(Program &p, const std::map<std::string, json::Value> &configs,
                          const std::vector<Placeholder> &placeholders) {
  std::map<std::string, bool> requiresGrad;
  auto stored = [&](const std::string &name, at::Tensor &t) -> bool {
    for (auto &[folder, cfg] : configs) {
      const json::Object *entries = field(cfg.getAsObject(), "config");
      if (const json::Object *e = field(entries, name.c_str())) {
        const json::Object *meta = e->getObject("tensor_meta");
        requiresGrad[name] = meta && meta->getBoolean("requires_grad").value_or(true);
        return p.readTensor(folder, name, *e, t);
      }
    }
    return p.fail("the program reads '" + name + "', which the archive does not store (is the "
                  "file incomplete? export it again)");
  };
  for (const Placeholder &ph : placeholders) {
    if (ph.role == Placeholder::Input)
      continue;
    at::Tensor t;
    if (!stored(ph.stateName, t))
      return p.error;
    auto [owner, leaf] = ownerAndLeaf(ph.stateName);
    torch::jit::Module &m = p.moduleAt(owner);
    if (ph.role == Placeholder::Parameter) {
      t.set_requires_grad(requiresGrad[ph.stateName]);
      m.register_parameter(leaf, t, /*is_buffer=*/false);
    } else if (ph.role == Placeholder::Buffer && ph.persistent) {
      m.register_buffer(leaf, t);
    } else {
      // Non-persistent buffers and lifted constants are not in the state_dict.
      m.register_attribute(leaf, c10::TensorType::get(), t);
    }
  }
  return "";
}

/// The graph's inputs: self, then the user inputs; state placeholders read attributes of
/// self. Buffers the program updates (buffer-mutation outputs) are read through a copy, so
/// that writing the new value into the buffer at the end does not change a tensor that
/// autograd saved (ds-reference runs this graph with autograd); `stateValues` holds their
/// attributes.
void addGraphInputs(Program &p, const json::Object *signature,
                    const std::vector<Placeholder> &placeholders,
                    std::map<std::string, Value *> &stateValues) {
  std::set<std::string> mutated;
  if (const json::Array *outSpecs = signature->getArray("output_specs"))
    for (const json::Value &spec : *outSpecs)
      if (const json::Object *s = spec.getAsObject())
        if (const json::Object *m = s->getObject("buffer_mutation"))
          mutated.insert(m->getString("buffer_name").value_or("").str());

  Value *self = p.graph->addInput("self");
  self->setType(p.root.type());
  for (const Placeholder &ph : placeholders) {
    if (ph.role == Placeholder::Input) {
      Value *in = p.graph->addInput(ph.argName);
      in->setType(c10::TensorType::get());
      p.values[ph.argName] = in;
      continue;
    }
    Value *v = self;
    size_t start = 0;
    while (true) {
      size_t dot = ph.stateName.find('.', start);
      std::string part = ph.stateName.substr(start, dot == std::string::npos ? std::string::npos
                                                                              : dot - start);
      v = p.graph->insertGetAttr(v, part);
      if (dot == std::string::npos)
        break;
      start = dot + 1;
    }
    if (ph.role == Placeholder::Buffer && mutated.count(ph.stateName)) {
      stateValues[ph.stateName] = v;
      v = p.graph->insert(c10::Symbol::aten("clone"), {v});
    }
    p.values[ph.argName] = v;
  }
}

/// Example shapes of the user inputs (-1: a dynamic dimension).
void readExampleInputs(const json::Object *g, const std::vector<Placeholder> &placeholders,
                       LoadedModel &out) {
  const json::Object *tensorValues = g->getObject("tensor_values");
  for (const Placeholder &ph : placeholders) {
    if (ph.role != Placeholder::Input)
      continue;
    ExampleInput ex{ph.argName, {}, 0};
    if (const json::Object *meta = field(tensorValues, ph.argName.c_str())) {
      ex.scalarType = scalarTypeOf(meta->getInteger("dtype").value_or(0));
      if (const json::Array *sizes = meta->getArray("sizes"))
        for (const json::Value &s : *sizes) {
          auto n = s.getAsObject() ? s.getAsObject()->getInteger("as_int") : std::nullopt;
          ex.sizes.push_back(n ? *n : -1);
        }
    }
    out.exampleInputs.push_back(ex);
  }
}

/// Tied weights of a weight-free export. torch.export lists each tied name as a placeholder
/// and the graph reads one of them; with real weights the stored storage tells the others
/// apart, with meta tensors nothing does. So a parameter the graph never reads becomes the
/// tensor of the one read parameter of its shape and dtype, where exactly one has them (an
/// embedding and its tied output projection); otherwise it stays its own tensor.
void tieUnreadMetaParameters(Program &p, const std::vector<Placeholder> &placeholders) {
  auto tensorOf = [&](const std::string &stateName) {
    auto [owner, leaf] = ownerAndLeaf(stateName);
    return p.moduleAt(owner).attr(leaf).toTensor();
  };
  std::vector<std::pair<std::string, at::Tensor>> read, unread;
  for (const Placeholder &ph : placeholders) {
    if (ph.role != Placeholder::Parameter)
      continue;
    at::Tensor t = tensorOf(ph.stateName);
    if (t.is_meta())
      (p.values[ph.argName]->uses().empty() ? unread : read).push_back({ph.stateName, t});
  }
  for (auto &[name, t] : unread) {
    const at::Tensor *tie = nullptr;
    int matches = 0;
    for (auto &[other, u] : read)
      if (u.sizes() == t.sizes() && u.scalar_type() == t.scalar_type()) {
        tie = &u;
        ++matches;
      }
    if (matches != 1)
      continue;
    auto [owner, leaf] = ownerAndLeaf(name);
    p.moduleAt(owner).setattr(leaf, *tie);
  }
}

/// The results: the user outputs; a buffer mutation (a functionalized program's update of
/// BatchNorm's running statistics) becomes an in-place copy into the buffer.
std::string addResults(Program &p, const json::Object *signature,
                       std::map<std::string, Value *> &stateValues) {
  std::vector<Value *> results;
  if (const json::Array *outSpecs = signature->getArray("output_specs"))
    for (const json::Value &spec : *outSpecs) {
      const json::Object *s = spec.getAsObject();
      if (!s || s->size() != 1)
        return "its signature has a malformed output spec";
      const auto &[kind, body] = *s->begin();
      if (kind == "buffer_mutation") {
        const json::Object *b = body.getAsObject();
        std::string buffer = b ? b->getString("buffer_name").value_or("").str() : "";
        const json::Object *t = field(b, "arg");
        auto name = t ? t->getString("name") : std::nullopt;
        if (!stateValues.count(buffer) || !name || !p.values.count(name->str()))
          return "its forward updates buffer '" + buffer + "', which it does not read";
        Node *copy = p.graph->create(c10::Symbol::aten("copy_"),
                                     {stateValues[buffer], p.values[name->str()],
                                      p.graph->insertConstant(false)},
                                     1);
        copy->output()->setType(c10::TensorType::get());
        p.graph->insertNode(copy);
        continue;
      }
      if (kind != "user_output")
        return "its forward has a '" + kind.str() + "' output (" +
               (kind == "buffer_mutation" ? "it updates a buffer, as BatchNorm's running "
                                            "statistics; export such models with TorchScript"
                                          : "ds imports forwards that only return values") +
               ")";
      const json::Object *arg = field(body.getAsObject(), "arg");
      const json::Object *t = field(arg, "as_tensor");
      auto name = t ? t->getString("name") : std::nullopt;
      if (!name || !p.values.count(name->str()))
        return "its forward returns a value that is not a tensor of the graph";
      results.push_back(p.values[name->str()]);
    }
  if (results.empty())
    return "its forward returns nothing";
  if (results.size() == 1)
    p.graph->registerOutput(results[0]);
  else
    p.graph->registerOutput(p.graph->insertNode(p.graph->createTuple(results))->output());
  return "";
}
} // namespace

std::string exported::loadProgram(caffe2::serialize::PyTorchStreamReader &archive,
                                  const std::string &programRecord, LoadedModel &out) {
  auto [data, size] = archive.getRecord(programRecord);
  auto parsed = json::parse(llvm::StringRef(static_cast<const char *>(data.get()), size));
  if (!parsed) {
    std::string msg = llvm::toString(parsed.takeError());
    return "its program " + programRecord + " is not valid JSON (" + msg + ")";
  }
  const json::Object *top = parsed->getAsObject();
  if (std::string e = checkSchema(top); !e.empty())
    return e;
  const json::Object *gm = field(top, "graph_module");
  const json::Object *g = field(gm, "graph");
  const json::Object *signature = field(gm, "signature");
  if (!g || !signature)
    return "its program has no graph_module.graph/signature";

  Program p{archive};
  p.cu = std::make_shared<torch::jit::CompilationUnit>();
  p.root = torch::jit::Module(c10::QualifiedName("__torch__.ds_export.ExportedProgram"), p.cu);
  p.modules.emplace("", p.root);
  p.graph = std::make_shared<Graph>();

  std::map<std::string, json::Value> configs;
  if (std::string e = readTensorConfigs(archive, configs); !e.empty())
    return e;
  // State: parameters, buffers and constants, registered before the graph reads them.
  std::vector<Placeholder> placeholders;
  if (std::string e = readPlaceholders(signature, placeholders); !e.empty())
    return e;
  if (std::string e = registerState(p, configs, placeholders); !e.empty())
    return e;
  // Tied weights: a name the program does not read but the state_dict has (torch.export
  // lists each tied name as its own placeholder, both reading one stored file; nothing to add).

  std::map<std::string, Value *> stateValues; // mutated buffer -> its attribute
  addGraphInputs(p, signature, placeholders, stateValues);
  readExampleInputs(g, placeholders, out);

  const json::Array *nodes = g->getArray("nodes");
  if (!nodes)
    return "its graph has no nodes";
  for (const json::Value &n : *nodes) {
    const json::Object *o = n.getAsObject();
    if (!o || !p.call(*o))
      return p.error.empty() ? "its graph has a malformed node" : p.error;
  }

  if (std::string e = addResults(p, signature, stateValues); !e.empty())
    return e;
  tieUnreadMetaParameters(p, placeholders);

  auto *fn = p.cu->create_function(
      c10::QualifiedName(*p.root.type()->name(), "forward"), p.graph);
  p.root.type()->addMethod(fn);
  out.module = p.root;
  out.exported = true;
  return "";
}
