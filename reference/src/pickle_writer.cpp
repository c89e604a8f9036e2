// The golden pickle writer of SPEC 2.3: PROTO 5, no FRAME, no memo opcodes, the
// smallest integer and length opcodes, batches of at most 1000 for lists and dicts.
#include <bit>
#include <cstring>

#include "hpref/error.hpp"
#include "hpref/pickle.hpp"
#include "pickle_opcodes.hpp"

namespace hpref {
namespace {

constexpr std::size_t kBatchSize = 1000;

void put_le(std::string& out, std::uint64_t x, int nbytes) {
  for (int i = 0; i < nbytes; ++i) out.push_back(static_cast<char>((x >> (8 * i)) & 0xff));
}

// Bytes in the minimal two's-complement form of x (1..8).
int signed_byte_count(std::int64_t x) {
  for (int n = 1; n < 8; ++n) {
    std::int64_t lo = -(std::int64_t{1} << (8 * n - 1));
    std::int64_t hi = (std::int64_t{1} << (8 * n - 1)) - 1;
    if (x >= lo && x <= hi) return n;
  }
  return 8;
}

}  // namespace

void PickleWriter::begin() {
  opcode(op::PROTO);
  opcode(5);
}

void PickleWriter::end() { opcode(op::STOP); }

void PickleWriter::pushes() {
  if (height_ >= max_stack_) {
    throw Error(Errc::pickle_stack_limit,
                "cannot write pickle: its reader's stack would hold more than " +
                    std::to_string(max_stack_) +
                    " entries (items and MARKs), the SPEC 2.3 limit: a tuple that long cannot "
                    "be decoded");
  }
  ++height_;
}

void PickleWriter::none() {
  pushes();
  opcode(op::NONE);
}

void PickleWriter::boolean(bool b) {
  pushes();
  opcode(b ? op::NEWTRUE : op::NEWFALSE);
}

void PickleWriter::integer(std::int64_t i) {
  pushes();
  if (i >= 0 && i <= 0xff) {
    opcode(op::BININT1);
    put_le(out_, static_cast<std::uint64_t>(i), 1);
  } else if (i >= 0 && i <= 0xffff) {
    opcode(op::BININT2);
    put_le(out_, static_cast<std::uint64_t>(i), 2);
  } else if (i >= INT32_MIN && i <= INT32_MAX) {
    opcode(op::BININT);
    put_le(out_, static_cast<std::uint64_t>(i), 4);
  } else {
    int n = signed_byte_count(i);
    opcode(op::LONG1);
    opcode(static_cast<std::uint8_t>(n));
    put_le(out_, static_cast<std::uint64_t>(i), n);
  }
}

void PickleWriter::floating(double d) {
  pushes();
  opcode(op::BINFLOAT);
  std::uint64_t bits = std::bit_cast<std::uint64_t>(d);
  for (int i = 7; i >= 0; --i) out_.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
}

void PickleWriter::length_prefixed(std::uint8_t op1, std::uint8_t op4, std::uint8_t op8,
                                   std::string_view data) {
  pushes();
  if (op1 != 0 && data.size() < 256) {
    opcode(op1);
    put_le(out_, data.size(), 1);
  } else if (op4 != 0 && data.size() <= 0xffffffffu) {
    opcode(op4);
    put_le(out_, data.size(), 4);
  } else {
    opcode(op8);
    put_le(out_, data.size(), 8);
  }
  out_.append(data);
}

void PickleWriter::str(std::string_view utf8) {
  length_prefixed(op::SHORT_BINUNICODE, op::BINUNICODE, op::BINUNICODE8, utf8);
}

void PickleWriter::bytes(std::string_view data) {
  length_prefixed(op::SHORT_BINBYTES, op::BINBYTES, op::BINBYTES8, data);
}

void PickleWriter::bytearray(std::string_view data) { length_prefixed(0, 0, op::BYTEARRAY8, data); }

void PickleWriter::begin_tuple(std::size_t n) {
  if (n > 3) {
    pushes();
    opcode(op::MARK);
  }
}

void PickleWriter::end_tuple(std::size_t n) {
  pops(n > 3 ? n + 1 : n);
  pushes();
  switch (n) {
    case 0: opcode(op::EMPTY_TUPLE); break;
    case 1: opcode(op::TUPLE1); break;
    case 2: opcode(op::TUPLE2); break;
    case 3: opcode(op::TUPLE3); break;
    default: opcode(op::TUPLE); break;
  }
}

void PickleWriter::value(const Value& v) {
  switch (v.kind()) {
    case ValueKind::none: none(); return;
    case ValueKind::boolean: boolean(v.as_bool()); return;
    case ValueKind::integer: integer(v.as_int()); return;
    case ValueKind::floating: floating(v.as_float()); return;
    case ValueKind::string: str(v.as_str()); return;
    case ValueKind::bytes: bytes(v.as_bytes().view()); return;
    case ValueKind::bytearray: bytearray(v.as_bytes().view()); return;
    case ValueKind::tensor:
      throw Error(Errc::pickle_unwritable,
                  "a tensor cannot be written into a metadata pickle; segments carry tensors "
                  "in their binary region");
    case ValueKind::tuple: {
      auto items = v.items();
      begin_tuple(items.size());
      for (const Value& item : items) value(item);
      end_tuple(items.size());
      return;
    }
    case ValueKind::list: {
      pushes();
      opcode(op::EMPTY_LIST);
      auto items = v.items();
      for (std::size_t start = 0; start < items.size(); start += kBatchSize) {
        std::size_t n = std::min(kBatchSize, items.size() - start);
        if (n > 1) {
          pushes();
          opcode(op::MARK);
        }
        for (std::size_t i = start; i < start + n; ++i) value(items[i]);
        pops(n > 1 ? n + 1 : n);
        opcode(n > 1 ? op::APPENDS : op::APPEND);
      }
      return;
    }
    case ValueKind::mapping: {
      pushes();
      opcode(op::EMPTY_DICT);
      auto entries = v.entries();
      for (std::size_t start = 0; start < entries.size(); start += kBatchSize) {
        std::size_t n = std::min(kBatchSize, entries.size() - start);
        if (n > 1) {
          pushes();
          opcode(op::MARK);
        }
        for (std::size_t i = start; i < start + n; ++i) {
          value(entries[i].first);
          value(entries[i].second);
        }
        pops(n > 1 ? 2 * n + 1 : 2 * n);
        opcode(n > 1 ? op::SETITEMS : op::SETITEM);
      }
      return;
    }
  }
}

std::pair<std::string_view, std::string_view> split_key_class(std::string_view key_class) {
  auto dot = key_class.rfind('.');
  if (dot == std::string_view::npos || dot == 0 || dot + 1 == key_class.size()) {
    throw Error(Errc::invalid_argument, "key class '" + std::string(key_class) +
                                            "' is not a dotted name <module>.<Name>");
  }
  return {key_class.substr(0, dot), key_class.substr(dot + 1)};
}

void PickleWriter::key_object(const SampleKey& key, std::string_view key_class) {
  auto [module, name] = split_key_class(key_class);
  str(module);
  str(name);
  pops(2);
  pushes();
  opcode(op::STACK_GLOBAL);
  pushes();
  opcode(op::EMPTY_TUPLE);
  pops(2);
  pushes();
  opcode(op::NEWOBJ);
  pushes();
  opcode(op::EMPTY_DICT);
  pushes();
  opcode(op::MARK);
  str("sample_id");
  if (const auto* id = std::get_if<std::int64_t>(&key.sample_id)) {
    integer(*id);
  } else {
    str(std::get<std::string>(key.sample_id));
  }
  str("position");
  integer(key.position);
  pops(5);
  opcode(op::SETITEMS);
  pops(1);
  opcode(op::BUILD);
}

std::string write_pickle(const Value& v, const PickleLimits& limits) {
  // SPEC 2.3: whatever encodes decodes. The reader refuses a Value deeper than its limit.
  if (v.depth() > limits.max_depth) {
    throw Error(Errc::depth_limit, "cannot write pickle: the value nests " +
                                       std::to_string(v.depth()) + " levels deep, deeper than " +
                                       "the " + std::to_string(limits.max_depth) +
                                       "-level metadata pickle limit (SPEC 2.3)");
  }
  std::string out;
  PickleWriter w(out, limits);
  w.begin();
  w.value(v);
  w.end();
  return out;
}

}  // namespace hpref
