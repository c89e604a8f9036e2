// The inspect view of a segment (see inspect.hpp).
#include "hpref/inspect.hpp"

#include <ostream>
#include <sstream>
#include <streambuf>
#include <string>

#include "hpref/error.hpp"
#include "hpref/pickle.hpp"
#include "hpref/repr.hpp"

namespace hpref {
namespace {

// Counts what is written to it and keeps nothing: the first pass of inspect.
class CountingBuffer final : public std::streambuf {
 public:
  std::uint64_t count() const { return count_; }

 protected:
  int_type overflow(int_type c) override {
    if (!traits_type::eq_int_type(c, traits_type::eof())) ++count_;
    return traits_type::not_eof(c);
  }
  std::streamsize xsputn(const char*, std::streamsize n) override {
    count_ += static_cast<std::uint64_t>(n);
    return n;
  }

 private:
  std::uint64_t count_ = 0;
};

[[noreturn]] void inspect_over_cap(std::uint64_t cap) {
  throw Error(Errc::output_limit,
              "the inspect view of this segment would be more than " + std::to_string(cap) +
                  " bytes (memo references are printed out in full); raise the output cap (hpref "
                  "frame --max-output-bytes, or hpref.codec.inspect's max_output_bytes) to allow "
                  "it");
}

class SchemaPrinter {
 public:
  // `counted`, when given, is the buffer behind `out`: past `cap` bytes, Error output_limit.
  SchemaPrinter(std::ostream& out, const CountingBuffer* counted, std::uint64_t cap)
      : out_(out), counted_(counted), cap_(cap) {}

  void node(const Value& schema, int indent) {
    if (counted_ != nullptr && counted_->count() > cap_) inspect_over_cap(cap_);
    auto f = schema.items();
    std::string_view tag = f[0].as_str();
    std::string pad(static_cast<std::size_t>(indent) * 2, ' ');
    if (tag == "__hp_tensor__") {
      out_ << "tensor " << f[1].as_str().substr(6) << " shape " << repr(f[2], 60) << " offset "
           << f[3].as_int() << " size " << f[4].as_int() << "\n";
    } else if (tag == "__hp_bytes__" || tag == "__hp_bytearray__") {
      out_ << (tag == "__hp_bytes__" ? "bytes" : "bytearray") << " offset " << f[1].as_int()
           << " size " << f[2].as_int() << "\n";
    } else if (tag == "__hp_value__") {
      out_ << "value " << repr(f[1], 80) << "\n";
    } else if (tag == "__hp_mapping__") {
      out_ << "mapping (" << f[1].items().size() << " entries)\n";
      for (const Value& pair : f[1].items()) {
        out_ << pad << "  " << repr(pair.items()[0], 60) << ": ";
        node(pair.items()[1], indent + 1);
      }
    } else {
      out_ << (tag == "__hp_tuple__" ? "tuple" : "list") << " (" << f[1].items().size()
           << " items)\n";
      std::size_t i = 0;
      for (const Value& child : f[1].items()) {
        out_ << pad << "  [" << i++ << "] ";
        node(child, indent + 1);
      }
    }
  }

 private:
  std::ostream& out_;
  const CountingBuffer* counted_;
  std::uint64_t cap_;
};

void write_inspect(std::ostream& out, const CountingBuffer* counted,
                   std::span<const std::uint8_t> segment, const DecodeOptions& options,
                   std::uint64_t cap) {
  SharedBytes bytes = SharedBytes::copy_of(segment);
  std::vector<Item> items = decode_segment(bytes, options);
  SegmentHeader h = read_segment_header(segment);
  switch (h.kind) {
    case SegmentHeader::Kind::empty:
      out << "segment: empty (0 bytes, 0 items)\n";
      return;
    case SegmentHeader::Kind::legacy:
      out << "segment: legacy metadata pickle, " << segment.size() << " bytes, " << items.size()
          << " items (no binary leaves)\n";
      for (std::size_t i = 0; i < items.size(); ++i) {
        out << "item " << i << " key " << repr(items[i].first, 80) << "\n  value "
            << repr(items[i].second, 200) << "\n";
        if (counted != nullptr && counted->count() > cap) inspect_over_cap(cap);
      }
      return;
    case SegmentHeader::Kind::framed:
      break;
  }
  out << "segment: HPB1 frame, " << segment.size() << " bytes = header 20 + metadata "
      << h.metadata_size << " + binary " << h.binary_size << "; " << items.size() << " items"
      << (options.strict ? " (strict layout checked)" : "") << "\n";
  Value metadata = read_pickle(segment.subspan(kFrameHeaderSize, h.metadata_size), options.pickle);
  SchemaPrinter printer(out, counted, cap);
  std::size_t i = 0;
  for (const Value& pair : metadata.items()) {
    out << "item " << i++ << " key " << repr(pair.items()[0], 80) << "\n  ";
    printer.node(pair.items()[1], 1);
  }
}

}  // namespace

std::string inspect_segment(std::span<const std::uint8_t> segment, const DecodeOptions& options,
                            std::uint64_t max_output_bytes) {
  // First count, then write: the view is refused past the cap before it is built.
  CountingBuffer counter;
  std::ostream counting(&counter);
  write_inspect(counting, &counter, segment, options, max_output_bytes);
  if (counter.count() > max_output_bytes) inspect_over_cap(max_output_bytes);
  std::ostringstream out;
  write_inspect(out, nullptr, segment, options, max_output_bytes);
  return out.str();
}

}  // namespace hpref
