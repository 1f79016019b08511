//===- EnumOption.h - pass options that take one of an ODS enum's names ----===//
#ifndef DS_TRANSFORMS_ENUMOPTION_H
#define DS_TRANSFORMS_ENUMOPTION_H

#include <cstdint>
#include <optional>

namespace mlir::ds {
/// A cl option modifier (a Passes.td option's extra argument) that accepts every case of enum
/// `E` by its ODS name, e.g. `type=AdamW`: `EnumOptionValues<E, getMaxEnumValForE,
/// symbolizeE>()`. The names are the enum's own, so a new case is a new option value.
template <class E, unsigned (*Max)(), std::optional<E> (*FromValue)(uint32_t)>
struct EnumOptionValues {
  template <class Opt> void apply(Opt &option) const {
    for (uint32_t v = 0; v <= Max(); ++v)
      if (std::optional<E> e = FromValue(v))
        option.getParser().addLiteralOption(stringifyEnum(*e), *e, "");
  }
};
} // namespace mlir::ds

#endif // DS_TRANSFORMS_ENUMOPTION_H
