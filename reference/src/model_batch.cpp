// SPEC 6.1-6.3: spec validation, fingerprint, flatten, header, shapes and rebuild.
#include "hpref/model_batch.hpp"

#include <algorithm>
#include <set>

#include "hpref/error.hpp"
#include "hpref/repr.hpp"
#include "hpref/sha256.hpp"
#include "hpref/utf8.hpp"

namespace hpref {
namespace {

std::string dims_text(std::span<const std::int64_t> dims) {
  std::string out = "(";
  for (std::size_t i = 0; i < dims.size(); ++i) out += (i ? ", " : "") + std::to_string(dims[i]);
  return out + (dims.size() == 1 ? ",)" : ")");
}

std::size_t symbol_index(const std::vector<std::string>& symbols, const std::string& s) {
  return static_cast<std::size_t>(std::find(symbols.begin(), symbols.end(), s) - symbols.begin());
}

}  // namespace

ModelBatchLayout::ModelBatchLayout(std::vector<FieldSpec> fields) : fields_(std::move(fields)) {
  std::set<std::string> names;
  for (const FieldSpec& f : fields_) {
    if (f.name.empty()) throw Error(Errc::batch_spec, "a batch field needs a non-empty name");
    if (!is_valid_utf8(f.name))
      throw Error(Errc::batch_spec, "batch field name " + quote_bytes(f.name) + " is not UTF-8");
    if (!names.insert(f.name).second) {
      throw Error(Errc::batch_spec, "batch field '" + f.name + "' is declared twice");
    }
    for (const Dim& d : f.dims) {
      if (const auto* n = std::get_if<std::int64_t>(&d); n && *n < 0) {
        throw Error(Errc::batch_spec,
                    "batch field '" + f.name + "' has a negative fixed dim " + std::to_string(*n));
      }
      if (const auto* s = std::get_if<std::string>(&d)) {
        if (s->empty())
          throw Error(Errc::batch_spec, "batch field '" + f.name + "' has an empty symbol name");
        if (symbol_index(symbols_, *s) == symbols_.size()) symbols_.push_back(*s);
      }
    }
  }
  fingerprint_ = sha256_hex(canonical_text());
}

std::string ModelBatchLayout::canonical_text() const {
  std::string out = "hpref-batch-spec-v1\n";
  for (const FieldSpec& f : fields_) {
    out += std::to_string(f.name.size()) + ":" + f.name + " " + std::string(dtype_name(f.dtype)) +
           (f.placement == Placement::cpu ? " cpu" : " accelerator");
    for (const Dim& d : f.dims) {
      if (const auto* n = std::get_if<std::int64_t>(&d)) {
        out += " " + std::to_string(*n);
      } else {
        const auto& s = std::get<std::string>(d);
        out += " $" + std::to_string(s.size()) + ":" + s;
      }
    }
    out += "\n";
  }
  return out;
}

ModelBatchLayout::Flat ModelBatchLayout::flatten(const Value& batch,
                                                 const NotTensorLabel& not_tensor) const {
  if (!batch.is(ValueKind::mapping)) {
    throw Error(Errc::batch_spec, "a batch must be a mapping of field name to tensor, got " +
                                      std::string(value_kind_name(batch.kind())));
  }
  Flat flat;
  std::vector<bool> bound(symbols_.size(), false);
  flat.symbol_values.assign(symbols_.size(), 0);
  for (const FieldSpec& f : fields_) {
    const Value* found = nullptr;
    for (const auto& [k, v] : batch.entries()) {
      if (k.is(ValueKind::string) && k.as_str() == f.name) found = &v;
    }
    if (found == nullptr)
      throw Error(Errc::batch_missing_field, "batch has no field '" + f.name + "'");
    if (!found->is(ValueKind::tensor) || found->as_tensor().dtype() != f.dtype) {
      std::string got;
      if (found->is(ValueKind::tensor)) {
        got = dtype_name(found->as_tensor().dtype());
      } else {
        if (not_tensor) got = not_tensor(f.name);
        if (got.empty()) got = value_kind_name(found->kind());
      }
      throw Error(Errc::batch_dtype, "batch field '" + f.name + "' must be a " +
                                         std::string(dtype_name(f.dtype)) + " tensor, got " + got);
    }
    const Tensor& t = found->as_tensor();
    if (t.dim() != f.dims.size()) {
      throw Error(Errc::batch_rank, "batch field '" + f.name + "' has " + std::to_string(t.dim()) +
                                        " dims " + dims_text(t.shape()) + ", the spec declares " +
                                        std::to_string(f.dims.size()));
    }
    for (std::size_t i = 0; i < f.dims.size(); ++i) {
      std::int64_t actual = t.shape()[i];
      if (const auto* n = std::get_if<std::int64_t>(&f.dims[i])) {
        if (actual != *n) {
          throw Error(Errc::batch_dim, "batch field '" + f.name + "' dim " + std::to_string(i) +
                                           " is " + std::to_string(actual) +
                                           ", the spec fixes it at " + std::to_string(*n));
        }
        continue;
      }
      const auto& s = std::get<std::string>(f.dims[i]);
      std::size_t k = symbol_index(symbols_, s);
      if (bound[k] && flat.symbol_values[k] != actual) {
        throw Error(Errc::batch_symbol, "symbol '" + s + "' is " +
                                            std::to_string(flat.symbol_values[k]) +
                                            " elsewhere but " + std::to_string(actual) +
                                            " in field '" + f.name + "' dim " + std::to_string(i));
      }
      bound[k] = true;
      flat.symbol_values[k] = actual;
    }
    flat.tensors.push_back(t);
  }
  for (const auto& entry : batch.entries()) {
    const Value& key = entry.first;
    bool known = key.is(ValueKind::string) &&
                 std::any_of(fields_.begin(), fields_.end(),
                             [&](const FieldSpec& f) { return f.name == key.as_str(); });
    if (!known)
      throw Error(Errc::batch_unknown_field,
                  "batch field " + repr(key, 60) + " is not in the spec");
  }
  return flat;
}

std::vector<std::int64_t> ModelBatchLayout::header(const Flat& flat) const {
  std::vector<std::int64_t> h = {kBatch};
  h.insert(h.end(), flat.symbol_values.begin(), flat.symbol_values.end());
  return h;
}

std::vector<std::int64_t> ModelBatchLayout::header(std::int64_t status) const {
  std::vector<std::int64_t> h(1 + symbols_.size(), 0);
  h[0] = status;
  return h;
}

std::int64_t ModelBatchLayout::header_status(std::span<const std::int64_t> header) const {
  if (header.size() != 1 + symbols_.size()) {
    throw Error(Errc::batch_header, "batch header has " + std::to_string(header.size()) +
                                        " values, the spec needs " +
                                        std::to_string(1 + symbols_.size()));
  }
  std::int64_t status = header[0];
  if (status != kBatchFailed && status != kEndOfData && status != kBatch) {
    throw Error(Errc::batch_header, "batch header status " + std::to_string(status) +
                                        " is not -1 (failed), 0 (end of data) or 1 (batch)");
  }
  return status;
}

std::vector<std::vector<std::int64_t>> ModelBatchLayout::shapes(
    std::span<const std::int64_t> header, std::uint64_t max_message_bytes) const {
  if (header_status(header) != kBatch) {
    throw Error(Errc::batch_header,
                "batch header status " + std::to_string(header[0]) + " carries no shapes");
  }
  for (std::size_t k = 0; k < symbols_.size(); ++k) {
    if (header[k + 1] < 0) {
      throw Error(Errc::batch_header, "batch header gives symbol '" + symbols_[k] +
                                          "' the negative value " + std::to_string(header[k + 1]));
    }
  }
  std::vector<std::vector<std::int64_t>> out;
  for (const FieldSpec& f : fields_) {
    std::vector<std::int64_t> shape;
    for (const Dim& d : f.dims) {
      const auto* n = std::get_if<std::int64_t>(&d);
      shape.push_back(n ? *n : header[symbol_index(symbols_, std::get<std::string>(d)) + 1]);
    }
    auto numel = checked_numel(shape);
    std::int64_t bytes = 0;
    if (!numel ||
        __builtin_mul_overflow(*numel, static_cast<std::int64_t>(element_size(f.dtype)), &bytes) ||
        static_cast<std::uint64_t>(bytes) > max_message_bytes) {
      throw Error(Errc::batch_size_limit,
                  "batch field '" + f.name + "' of shape " + dims_text(shape) +
                      " would exceed max_message_bytes " + std::to_string(max_message_bytes));
    }
    out.push_back(std::move(shape));
  }
  return out;
}

Value ModelBatchLayout::rebuild(std::vector<Tensor> tensors) const {
  if (tensors.size() != fields_.size()) {
    throw Error(Errc::batch_spec, "rebuild got " + std::to_string(tensors.size()) +
                                      " tensors for " + std::to_string(fields_.size()) + " fields");
  }
  std::vector<Value::Entry> entries;
  for (std::size_t i = 0; i < fields_.size(); ++i) {
    entries.emplace_back(Value::string(fields_[i].name), Value::tensor(std::move(tensors[i])));
  }
  return Value::mapping(std::move(entries));
}

}  // namespace hpref
