// The model-parallel batch declaration and layout (SPEC 6.1-6.3): every rank declares the
// same ModelBatchSpec, so only dynamic dims travel (in the int64 header [status,
// symbol values...]) and peers allocate from their own declaration, never from an
// unchecked peer size.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "hpref/dtype.hpp"
#include "hpref/tensor.hpp"
#include "hpref/value.hpp"

namespace hpref {

enum class Placement { cpu, accelerator };

// A dim: a fixed size (>= 0) or a named dynamic symbol.
using Dim = std::variant<std::int64_t, std::string>;

struct FieldSpec {
  std::string name;
  DType dtype = DType::float32;
  Placement placement = Placement::cpu;
  std::vector<Dim> dims;
};

// Header status values (SPEC 6.2).
inline constexpr std::int64_t kBatchFailed = -1;
inline constexpr std::int64_t kEndOfData = 0;
inline constexpr std::int64_t kBatch = 1;

class ModelBatchLayout {
 public:
  // Error batch_spec for an empty or repeated field name, a negative fixed dim or an empty
  // symbol name.
  explicit ModelBatchLayout(std::vector<FieldSpec> fields);

  const std::vector<FieldSpec>& fields() const { return fields_; }
  // Symbols numbered by first appearance, scanning fields then dims in order.
  const std::vector<std::string>& symbols() const { return symbols_; }
  std::string canonical_text() const;
  const std::string& fingerprint() const { return fingerprint_; }  // SHA-256 hex

  struct Flat {
    std::vector<Tensor> tensors;              // in field order
    std::vector<std::int64_t> symbol_values;  // in symbol order
  };
  // SPEC 6.2: `batch` is a mapping of field name -> tensor. Checks per field in order:
  // presence (batch_missing_field), a tensor of the dtype (batch_dtype), rank
  // (batch_rank), fixed dims (batch_dim), symbols taking one value (batch_symbol); then a
  // name not in the spec (batch_unknown_field). batch_dtype names a value that is not a
  // tensor by its kind ("got int"), or by `not_tensor(field name)` where that is given and
  // answers non-empty (a binding whose values were not Values: "got a Python list").
  using NotTensorLabel = std::function<std::string(const std::string& field)>;
  Flat flatten(const Value& batch, const NotTensorLabel& not_tensor = {}) const;

  // [kBatch, symbol values...], or [status, 0...] for end of data and failure.
  std::vector<std::int64_t> header(const Flat& flat) const;
  std::vector<std::int64_t> header(std::int64_t status) const;

  // SPEC 6.3: the status of a received header (Error batch_header if its length is not
  // 1 + symbols or the status is not -1, 0 or 1).
  std::int64_t header_status(std::span<const std::int64_t> header) const;
  // SPEC 6.3 for a status-1 header: every symbol value >= 0 (batch_header) and every
  // field's byte size <= max_message_bytes (batch_size_limit), checked before anything
  // is allocated; returns each field's shape.
  std::vector<std::vector<std::int64_t>> shapes(std::span<const std::int64_t> header,
                                                std::uint64_t max_message_bytes) const;

  // The batch mapping from tensors in field order (the inverse of flatten).
  Value rebuild(std::vector<Tensor> tensors) const;

 private:
  std::vector<FieldSpec> fields_;
  std::vector<std::string> symbols_;
  std::string fingerprint_;
};

}  // namespace hpref
