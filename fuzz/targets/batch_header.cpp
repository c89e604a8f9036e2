// Fuzz target batch_header: a model-batch spec and a received header decoded from bytes
// (SPEC 6.1-6.3). Checks: header_status and shapes accept or refuse with an hpref::Error
// only; header_status accepts exactly a header of 1 + symbols values whose status is -1, 0
// or 1 (else batch_header); shapes accepts exactly a status-1 header whose symbol values
// are all >= 0 and whose fields each fit max_message_bytes, and refuses with batch_header
// (status not 1, or a negative symbol value, checked first) or batch_size_limit (a field
// too large); accepted shapes match the spec's fixed dims and the header's symbol values
// and stay within max_message_bytes; tensors of those shapes rebuild into a batch whose
// flatten gives back the same header.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "byte_reader.hpp"
#include "fuzz_check.hpp"
#include "hpref/model_batch.hpp"
#include "hpref/shared_bytes.hpp"
#include "hpref/tensor.hpp"

using namespace hpref;
using namespace hpref::fuzz;

namespace {

// Whether a field's byte size under `header` (numel exact: a zero dim makes it 0) is at
// most `max_bytes`, computed with overflow checks and stopped once past it (max_bytes is at most
// 2^19 here). The header's symbol values must be >= 0; the spec's fixed dims are
// (ModelBatchLayout refuses negative ones).
bool fits(const FieldSpec& field, const std::vector<std::string>& symbols,
          const std::vector<std::int64_t>& header, std::uint64_t max_bytes) {
  std::vector<std::int64_t> dims;
  for (const auto& d : field.dims) {
    if (const auto* fixed = std::get_if<std::int64_t>(&d)) {
      dims.push_back(*fixed);
    } else {
      auto k =
          std::find(symbols.begin(), symbols.end(), std::get<std::string>(d)) - symbols.begin();
      dims.push_back(header[static_cast<std::size_t>(k) + 1]);
    }
  }
  if (std::find(dims.begin(), dims.end(), 0) != dims.end()) return true;
  std::uint64_t bytes = element_size(field.dtype);
  for (std::int64_t d : dims) {
    // Past max_bytes (or past 2^64) it stays too large: every later dim is >= 1.
    if (__builtin_mul_overflow(bytes, static_cast<std::uint64_t>(d), &bytes)) return false;
    if (bytes > max_bytes) return false;
  }
  return bytes <= max_bytes;  // a rank-0 field is one element: the loop never ran
}

// What shapes() must refuse with (SPEC 6.3), or nullopt when it must accept.
std::optional<Errc> expected_shapes_refusal(const std::vector<FieldSpec>& fields,
                                            const std::vector<std::string>& symbols,
                                            const std::vector<std::int64_t>& header,
                                            std::uint64_t max_bytes) {
  if (header.size() != 1 + symbols.size() || header[0] != 1) return Errc::batch_header;
  for (std::size_t k = 1; k < header.size(); ++k) {
    if (header[k] < 0) return Errc::batch_header;
  }
  for (const FieldSpec& f : fields) {
    if (!fits(f, symbols, header, max_bytes)) return Errc::batch_size_limit;
  }
  return std::nullopt;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ByteReader in(data, size);
  std::vector<FieldSpec> fields(in.count(5));
  const char* symbol_names[] = {"B", "S", "H", "N"};
  for (std::size_t f = 0; f < fields.size(); ++f) {
    fields[f].name = "f" + std::to_string(in.byte() % 6);  // may repeat: batch_spec
    fields[f].dtype = dtype_at(in.byte() % kDTypeCount);
    fields[f].placement = (in.byte() & 1) ? Placement::accelerator : Placement::cpu;
    std::size_t rank = in.count(4);
    for (std::size_t d = 0; d < rank; ++d) {
      std::uint8_t sel = in.byte();
      if (sel & 1) {
        fields[f].dims.emplace_back(std::string(symbol_names[(sel >> 1) % 4]));
      } else {
        fields[f].dims.emplace_back(static_cast<std::int64_t>(sel >> 1) - 4);  // negatives too
      }
    }
  }
  auto layout = attempt("ModelBatchLayout", [&] { return ModelBatchLayout(fields); });
  if (!layout) return 0;
  std::vector<std::int64_t> header(in.count(6));
  for (auto& v : header) v = in.integer();
  std::uint64_t max_bytes = std::uint64_t{1} << (in.byte() % 20);
  auto status = attempt("header_status", [&] { return layout.value->header_status(header); });
  auto shapes = attempt("shapes", [&] { return layout.value->shapes(header, max_bytes); });
  const auto& syms = layout.value->symbols();
  bool well_formed = header.size() == 1 + syms.size() && header[0] >= -1 && header[0] <= 1;
  if (well_formed) {
    HPREF_FUZZ_REQUIRE(
        status && *status.value == header[0],
        "header_status refused (" + kind_text(status.error) + ") or misread a well-formed header");
  } else {
    HPREF_FUZZ_REQUIRE(!status && *status.error == Errc::batch_header,
                       "header_status did not refuse a malformed header with batch_header: " +
                           kind_text(status.error));
  }
  std::optional<Errc> expected = expected_shapes_refusal(fields, syms, header, max_bytes);
  if (expected) {
    HPREF_FUZZ_REQUIRE(
        !shapes && *shapes.error == *expected,
        "shapes must refuse with " + kind_text(expected) + ", got " + kind_text(shapes.error));
    return 0;
  }
  HPREF_FUZZ_REQUIRE(shapes, "shapes refused a well-formed status-1 header whose fields fit (" +
                                 kind_text(shapes.error) + ")");
  std::vector<Tensor> tensors;
  for (std::size_t f = 0; f < fields.size(); ++f) {
    const auto& shape = (*shapes.value)[f];
    HPREF_FUZZ_REQUIRE(shape.size() == fields[f].dims.size(), "shape rank differs from the spec");
    for (std::size_t d = 0; d < shape.size(); ++d) {
      HPREF_FUZZ_REQUIRE(shape[d] >= 0, "negative dim accepted");
      if (const auto* fixed = std::get_if<std::int64_t>(&fields[f].dims[d])) {
        HPREF_FUZZ_REQUIRE(shape[d] == *fixed, "fixed dim not kept");
      } else {
        auto k = std::find(syms.begin(), syms.end(), std::get<std::string>(fields[f].dims[d])) -
                 syms.begin();
        HPREF_FUZZ_REQUIRE(shape[d] == header[static_cast<std::size_t>(k) + 1],
                           "symbol value not kept");
      }
    }
    auto numel = checked_numel(shape);
    HPREF_FUZZ_REQUIRE(numel.has_value(), "accepted a shape whose numel overflows");
    std::uint64_t bytes = static_cast<std::uint64_t>(*numel) * element_size(fields[f].dtype);
    HPREF_FUZZ_REQUIRE(bytes <= max_bytes, "accepted a field larger than max_message_bytes");
    tensors.push_back(
        Tensor(fields[f].dtype, shape, SharedBytes::adopt(std::vector<std::uint8_t>(bytes, 1))));
  }
  Value batch = layout.value->rebuild(tensors);
  auto flat = attempt("flatten", [&] { return layout.value->flatten(batch); });
  HPREF_FUZZ_REQUIRE(flat, "flatten refused a rebuilt batch with " + kind_text(flat.error));
  // Symbols bound by fields of zero extent still carry the header's value.
  HPREF_FUZZ_REQUIRE(layout.value->header(*flat.value) == header, "flatten's header differs");
  return 0;
}
