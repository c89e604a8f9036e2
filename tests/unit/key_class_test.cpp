// SPEC 1.4 key classes: the description (name, ordered fields, dict or values state), the
// reader accepting exactly the described pattern, the writer's bytes (CPython's pure-Python
// protocol-5 pickler in fast mode, FRAME cut, plus the memo of the class: SPEC 2.3's MEMOIZE
// after its first STACK_GLOBAL, BINGET after), the encode -> decode round trip, and the
// `hpref frame --batch` members key_fields / key_state. The CPython bytes below were
// written by CPython 3.11 for these dataclasses in a module `app.keys`:
//   @dataclass(frozen=True)              class ShardKey: shard; sample_id; position
//   @dataclass(frozen=True, slots=True)  class SlotKey: sample_id; position
//   @dataclass(frozen=True, slots=True)  class One: id
//   @dataclass(frozen=True)              class OneD: id
#include <string>
#include <vector>

#include "hpref/cli/batch.hpp"
#include "hpref/cli/frame.hpp"
#include "hpref/codec.hpp"
#include "hpref/pickle.hpp"
#include "test_util.hpp"

using namespace hpref;
using namespace std::literals;

namespace {

Value S(std::string_view s) { return Value::string(s); }
Value I(std::int64_t i) { return Value::integer(i); }
Value T(std::vector<Value> items) { return Value::tuple(std::move(items)); }
Value L(std::vector<Value> items) { return Value::list(std::move(items)); }

const KeyClass kShard("app.keys.ShardKey", {"shard", "sample_id", "position"},
                      KeyClass::State::dict);
const KeyClass kSlots("app.keys.SlotKey", {"sample_id", "position"}, KeyClass::State::values);
const KeyClass kOne("app.keys.One", {"id"}, KeyClass::State::values);
const KeyClass kOneD("app.keys.OneD", {"id"}, KeyClass::State::dict);

Value read(std::string_view bytes, const KeyClass& kc) {
  PickleReadOptions options;
  options.key_class = kc;
  return read_pickle(bytes, options);
}

// pickle.dumps(ShardKey("s0", 7, 1), protocol=2)
const auto kShardP2 =
    "\x80\x02"
    "capp.keys\x0aShardKey\x0aq\x00)\x81q\x01}q\x02(X\x05\x00\x00\x00shardq\x03X\x02\x00\x00\x00s0q\x04X\x09\x00\x00\x00sample_idq\x05K\x07X\x08\x00\x00\x00positionq\x06K\x01ub."sv;
// pickle.dumps((ShardKey("s0", 7, 1), ShardKey("s1", "doc", 2)), protocol=5)
const auto kShardP5 =
    "\x80\x05\x95h\x00\x00\x00\x00\x00\x00\x00\x8c\x08"
    "app.keys\x94\x8c\x08ShardKey\x94\x93\x94)\x81\x94}\x94("
    "\x8c\x05shard\x94\x8c\x02s0\x94\x8c\x09sample_id\x94K\x07\x8c\x08position\x94K\x01ubh\x02)"
    "\x81\x94}\x94(h\x05\x8c\x02s1\x94h\x07\x8c\x03"
    "doc\x94h\x08K\x02ub\x86\x94."sv;
// pickle.dumps(SlotKey(3, 4), protocol=2): BUILD with the list [3, 4]
const auto kSlotsP2 =
    "\x80\x02"
    "capp.keys\x0aSlotKey\x0aq\x00)\x81q\x01]q\x02(K\x03K\x04"
    "eb."sv;
// pickle.dumps((SlotKey(3, 4), SlotKey("x", 0)), protocol=5)
const auto kSlotsP5 =
    "\x80\x05\x95"
    "6\x00\x00\x00\x00\x00\x00\x00\x8c\x08"
    "app.keys\x94\x8c\x07SlotKey\x94\x93\x94)\x81\x94]\x94(K\x03K\x04"
    "ebh\x02)\x81\x94]\x94(\x8c\x01x\x94K\x00"
    "eb\x86\x94."sv;
// pickle.dumps(One(5), protocol=5): a list of one item is EMPTY_LIST item APPEND
const auto kOneP5 =
    "\x80\x05\x95\x1d\x00\x00\x00\x00\x00\x00\x00\x8c\x08"
    "app.keys\x94\x8c\x03One\x94\x93\x94)\x81\x94]\x94K\x05"
    "ab."sv;

// The fast-mode (no memo) protocol-5 bytes of CPython's pure-Python pickler, FRAME cut, with
// the one memo opcode SPEC 2.3 adds: MEMOIZE after the class's STACK_GLOBAL.
const auto kShardFast =
    "\x80\x05\x8c\x08"
    "app.keys\x8c\x08ShardKey\x93\x94)\x81}(\x8c\x05shard\x8c\x02s0\x8c\x09sample_idK\x07\x8c\x08positionK\x01ub."sv;
const auto kSlotsFast =
    "\x80\x05\x8c\x08"
    "app.keys\x8c\x07SlotKey\x93\x94)\x81](K\x03K\x04"
    "eb."sv;
const auto kOneFast =
    "\x80\x05\x8c\x08"
    "app.keys\x8c\x03One\x93\x94)\x81]K\x05"
    "ab."sv;
const auto kOneDFast =
    "\x80\x05\x8c\x08"
    "app.keys\x8c\x04OneD\x93\x94)\x81}\x8c\x02idK\x01\x8c\x01t\x86sb."sv;

std::string short_str(std::string_view s) {
  return "\x8c"s + static_cast<char>(s.size()) + std::string(s);
}

// The pattern up to NEWOBJ for class app.keys.ShardKey (protocol 5, no memo).
const std::string kShardNew =
    "\x80\x05"s + short_str("app.keys") + short_str("ShardKey") + "\x93)\x81";

std::string written(const Value& key, const KeyClass& kc) {
  std::string out;
  PickleWriter w(out);
  w.begin();
  w.key_object(key, kc);
  w.end();
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(key_class)

BOOST_AUTO_TEST_CASE(description_is_validated_spec_1_4) {
  // Assignable from a dotted name: default fields, dict state.
  KeyClass k = "a.B";
  BOOST_TEST(k.has_default_fields());
  BOOST_TEST((k.state == KeyClass::State::dict));
  k = std::string("pkg.mod.Key");
  BOOST_TEST(k.module() == "pkg.mod");
  BOOST_TEST(k.class_name() == "Key");
  BOOST_TEST(k.describe() == "pkg.mod.Key(sample_id, position; dict state)");
  BOOST_TEST(kShard.describe() == "app.keys.ShardKey(shard, sample_id, position; dict state)");
  BOOST_TEST(!kShard.has_default_fields());
  BOOST_TEST(
      KeyClass("m.K", {"position", "sample_id"}, KeyClass::State::dict).has_default_fields() ==
      false);
  k.validate();
  kShard.validate();
  KeyClass{}.validate();  // the shim off
  KeyClass("m\xc3\xa9.K\xc3\xa9", {"\xc3\xa9t\xc3\xa9"}, KeyClass::State::values).validate();
  for (std::string bad : {"NoDot", ".K", "m.", "m..K", "1m.K", "m.K-1", "m.K ", "m. K"}) {
    BOOST_TEST_CONTEXT(bad) {
      HPREF_CHECK_ERROR(KeyClass(bad).validate(), Errc::invalid_argument,
                        "key class '" + bad + "' is not a dotted name <module>.<Name>");
    }
  }
  HPREF_CHECK_ERROR(KeyClass("m.K\xff").validate(), Errc::invalid_argument, "not valid UTF-8");
  auto fields = [](std::vector<std::string> f) {
    return KeyClass("m.K", std::move(f), KeyClass::State::dict);
  };
  HPREF_CHECK_ERROR(fields({}).validate(), Errc::invalid_argument, "'m.K' has no fields");
  HPREF_CHECK_ERROR(fields({"a", "b", "a"}).validate(), Errc::invalid_argument,
                    "names field 'a' twice");
  for (std::string bad : {"", "1a", "a.b", "a b", "a-b"}) {
    BOOST_TEST_CONTEXT(bad) {
      HPREF_CHECK_ERROR(fields({"ok", bad}).validate(), Errc::invalid_argument,
                        "field '" + bad + "' is not a Python identifier");
    }
  }
  BOOST_TEST((parse_key_state("values") == KeyClass::State::values));
  BOOST_TEST((parse_key_state("dict") == KeyClass::State::dict));
  BOOST_TEST(key_state_name(KeyClass::State::values) == "values");
  HPREF_CHECK_ERROR(parse_key_state("list"), Errc::invalid_argument, "'list'");
  // The reader and the encoder refuse an invalid description before any byte.
  PickleReadOptions r;
  r.key_class = fields({"a", "a"});
  HPREF_CHECK_ERROR(read_pickle("\x80\x05N."sv, r), Errc::invalid_argument, "twice");
  EncodeOptions e;
  e.key_class = fields({"x y"});
  HPREF_CHECK_ERROR(encode_segment(std::vector<Item>{}, e), Errc::invalid_argument, "'x y'");
}

BOOST_AUTO_TEST_CASE(dict_state_reads_cpythons_dataclass_in_field_order_spec_1_4) {
  BOOST_TEST((read(kShardP2, kShard) == T({S("s0"), I(7), I(1)})));
  BOOST_TEST(
      (read(kShardP5, kShard) == T({T({S("s0"), I(7), I(1)}), T({S("s1"), S("doc"), I(2)})})));
  // The key is the tuple in the description's field order, whatever the dict's order.
  KeyClass reordered("app.keys.ShardKey", {"position", "shard", "sample_id"},
                     KeyClass::State::dict);
  BOOST_TEST((read(kShardP2, reordered) == T({I(1), S("s0"), I(7)})));
  // One field: the 1-tuple.
  BOOST_TEST((read(kOneDFast, kOneD) == T({T({I(1), S("t")})})));
}

BOOST_AUTO_TEST_CASE(values_state_reads_cpythons_slots_dataclass_spec_1_4) {
  BOOST_TEST((read(kSlotsP2, kSlots) == T({I(3), I(4)})));
  BOOST_TEST((read(kSlotsP5, kSlots) == T({T({I(3), I(4)}), T({S("x"), I(0)})})));
  BOOST_TEST((read(kOneP5, kOne) == T({I(5)})));
  // The default class name and fields in the values state.
  KeyClass sk(std::string(kDefaultKeyClass), {"sample_id", "position"}, KeyClass::State::values);
  std::string p = "\x80\x05"s + short_str("hyper_parallel.distributed_data.schema") +
                  short_str("SampleKey") + "\x93)\x81](" + short_str("doc") +
                  "K\x02"
                  "eb.";
  BOOST_TEST((read(p, sk) == T({S("doc"), I(2)})));
}

BOOST_AUTO_TEST_CASE(only_the_described_state_is_accepted_spec_1_4) {
  // The state form of the other kind of dataclass, each with a hint.
  HPREF_CHECK_ERROR(read(kSlotsP2, KeyClass("app.keys.SlotKey")), Errc::pickle_reduce,
                    "BUILD state of app.keys.SlotKey must be a dict of exactly 'sample_id' and "
                    "'position', got [3, 4] (a list is the values state");
  KeyClass shard_values = kShard;
  shard_values.state = KeyClass::State::values;
  HPREF_CHECK_ERROR(read(kShardP2, shard_values), Errc::pickle_reduce,
                    "must be the list of its 3 field values 'shard', 'sample_id' and 'position' "
                    "in order, got {'shard': 's0', 'sample_id': 7, 'position': 1} (a dict is the "
                    "dict state");
  // Extra field: ShardKey's dict read with the default fields.
  HPREF_CHECK_ERROR(read(kShardP2, KeyClass("app.keys.ShardKey")), Errc::pickle_reduce,
                    "exactly 'sample_id' and 'position', got {'shard': 's0'");
  // Missing field, other field, non-str key.
  auto build = [](std::string entries) { return kShardNew + "}(" + entries + "ub."; };
  std::string id = short_str("sample_id") + "K\x07", pos = short_str("position") + "K\x01";
  HPREF_CHECK_ERROR(read(build(id + pos), kShard), Errc::pickle_reduce,
                    "exactly 'shard', 'sample_id' and 'position', got {'sample_id': 7, "
                    "'position': 1}");
  HPREF_CHECK_ERROR(read(build(short_str("shards") + "N" + id + pos), kShard), Errc::pickle_reduce,
                    "got {'shards': None");
  HPREF_CHECK_ERROR(read(build("K\x00N"s + id + pos), kShard), Errc::pickle_reduce, "got {0: None");
  // Any order of the exact fields is accepted (a dict is a dict).
  BOOST_TEST(
      (read(build(pos + short_str("shard") + "N" + id), kShard) == T({Value(), I(7), I(1)})));
  // Values: wrong arity, a tuple instead of the list, a dict.
  std::string slot_new = "\x80\x05"s + short_str("app.keys") + short_str("SlotKey") + "\x93)\x81";
  HPREF_CHECK_ERROR(read(slot_new + "](K\x03K\x04K\x05"
                                    "eb.",
                         kSlots),
                    Errc::pickle_reduce,
                    "must be the list of its 2 field values 'sample_id' and 'position' in order, "
                    "got [3, 4, 5]");
  HPREF_CHECK_ERROR(read(slot_new + "]K\x03"
                                    "ab.",
                         kSlots),
                    Errc::pickle_reduce, "got [3]");
  HPREF_CHECK_ERROR(read(slot_new + "K\x03K\x04\x86"
                                    "b.",
                         kSlots),
                    Errc::pickle_reduce, "got (3, 4)");
  // What a non-frozen slots dataclass writes (None, {fields}) is neither state.
  std::string slots_dict = slot_new + "N}(" + short_str("sample_id") + "K\x03" +
                           short_str("position") +
                           "K\x04u\x86"
                           "b.";
  HPREF_CHECK_ERROR(read(slots_dict, kSlots), Errc::pickle_reduce, "got (None, {");
  HPREF_CHECK_ERROR(read(slots_dict, KeyClass("app.keys.SlotKey")), Errc::pickle_reduce,
                    "got (None, {");
  // The field values must be hashable.
  HPREF_CHECK_ERROR(read(slot_new + "](K\x03]eb.", kSlots), Errc::pickle_unhashable_key,
                    "app.keys.SlotKey fields (3, []) are not hashable");
  // Another class, or the shim off.
  HPREF_CHECK_ERROR(read(kSlotsP2, kOne), Errc::pickle_global, "app.keys.SlotKey");
  HPREF_CHECK_ERROR(read(kSlotsP2, KeyClass{}), Errc::pickle_global, "app.keys.SlotKey");
}

BOOST_AUTO_TEST_CASE(writer_bytes_are_cpythons_fast_pickle_spec_1_4) {
  BOOST_TEST(written(T({S("s0"), I(7), I(1)}), kShard) == kShardFast);
  BOOST_TEST(written(T({I(3), I(4)}), kSlots) == kSlotsFast);
  BOOST_TEST(written(T({I(5)}), kOne) == kOneFast);
  BOOST_TEST(written(T({T({I(1), S("t")})}), kOneD) == kOneDFast);
  // The SampleKey overload under the default class: today's bytes.
  BOOST_TEST(written(T({S("doc"), I(3)}), KeyClass(kDefaultKeyClass)) ==
             "\x80\x05"s + short_str("hyper_parallel.distributed_data.schema") +
                 short_str("SampleKey") + "\x93\x94)\x81}(" + short_str("sample_id") +
                 short_str("doc") + short_str("position") + "K\x03ub.");
  // 1001 fields in the values state: a batch of 1000 (MARK ... APPENDS), then one APPEND,
  // as CPython's pure-Python pickler writes app.keys.Big(*range(1001)).
  std::vector<std::string> names;
  std::vector<Value> values;
  for (int i = 0; i < 1001; ++i) {
    names.push_back("f" + std::to_string(i));
    values.push_back(I(i));
  }
  KeyClass big("app.keys.Big", names, KeyClass::State::values);
  std::string out = written(T(values), big);
  BOOST_TEST(out.size() == 2782u - 9u + 1u);  // CPython's less the 9-byte FRAME, plus MEMOIZE
  BOOST_TEST(hpref::test::hex(out.substr(out.size() - 12)) == "e6034de703654de80361622e");
  BOOST_TEST((read(out, big) == T(values)));
  // Refusals: not a tuple, wrong arity, invalid class, no class.
  HPREF_CHECK_ERROR(written(L({I(3), I(4)}), kSlots), Errc::invalid_argument,
                    "key [3, 4] is not a tuple of the 2 field values of app.keys.SlotKey("
                    "sample_id, position; values state)");
  HPREF_CHECK_ERROR(written(T({I(3)}), kSlots), Errc::invalid_argument, "key (3,)");
  HPREF_CHECK_ERROR(written(T({I(3), I(4)}), KeyClass("NoDot")), Errc::invalid_argument,
                    "'NoDot' is not a dotted name");
  HPREF_CHECK_ERROR(written(T({I(3), I(4)}), KeyClass{}), Errc::invalid_argument,
                    "needs a key class");
}

// SPEC 2.3 memo: the key-class global is MEMOIZEd at its first STACK_GLOBAL and fetched by
// BINGET for every later key of the same class (by dotted name); another class gets its
// own entry; the field names (the BUILD dict's keys) are never memoized. CPython, which
// memoizes everything (kShardP5), and our bytes read to the same value.
BOOST_AUTO_TEST_CASE(the_key_class_global_is_memoized_spec_2_3) {
  auto two_keys = [](const KeyClass& a, const KeyClass& b) {
    std::string out;
    PickleWriter w(out);
    w.begin();
    w.begin_tuple(3);
    w.key_object(T({S("s0"), I(7), I(1)}), a);
    w.key_object(T({S("s1"), S("doc"), I(2)}), b);
    w.key_object(T({S("s2"), I(0), I(0)}), a);
    w.end_tuple(3);
    w.end();
    return out;
  };
  auto state = [](std::string_view shard, std::string id, std::string_view pos) {
    return "}("s + short_str("shard") + short_str(shard) + short_str("sample_id") + id +
           short_str("position") + std::string(pos) + "ub";
  };
  std::string same = two_keys(kShard, kShard);
  BOOST_TEST(hpref::test::hex(same) ==
             hpref::test::hex(kShardNew.substr(0, kShardNew.size() - 2) + "\x94)\x81" +
                              state("s0", "K\x07", "K\x01") + "h\x00)\x81"s +
                              state("s1", short_str("doc"), "K\x02") + "h\x00)\x81"s +
                              state("s2", "K\x00"s, "K\x00"s) + "\x87."));
  Value want =
      T({T({S("s0"), I(7), I(1)}), T({S("s1"), S("doc"), I(2)}), T({S("s2"), I(0), I(0)})});
  BOOST_TEST((read(same, kShard) == want));
  BOOST_TEST((read(kShardP5, kShard) == T({want.items()[0], want.items()[1]})));
  // A second class (same fields, another name) is entry 1; the first stays entry 0.
  KeyClass other("app.keys.OtherKey", kShard.fields, KeyClass::State::dict);
  std::string mixed = two_keys(kShard, other);
  BOOST_TEST(mixed.find("\x8c\x08OtherKey\x93\x94)\x81"sv) != std::string::npos);
  BOOST_TEST(mixed.find("h\x00)\x81"sv) > mixed.find("OtherKey"));
  BOOST_TEST(mixed.find("h\x01"sv) == std::string::npos);
  HPREF_CHECK_ERROR(read(mixed, kShard), Errc::pickle_global, "app.keys.OtherKey");
}

BOOST_AUTO_TEST_CASE(encode_decode_round_trip_spec_1_4_spec_2_6) {
  std::vector<Item> items = {
      {T({S("s0"), I(7), I(1)}), Value::bytes("b"sv)},      // an instance
      {T({S("s1"), S("doc"), I(2)}), L({I(1), S("two")})},  // an instance
      {T({I(3), I(0)}), I(3)},                              // 2 values: a plain tuple
      {S("plain"), Value()},                                // not a tuple
      {T({T({I(1)}), Value::boolean(true), I(-5)}), I(4)},  // any hashable values
  };
  for (const KeyClass& kc :
       {kShard, KeyClass("app.keys.ShardKey", kShard.fields, KeyClass::State::values)}) {
    BOOST_TEST_CONTEXT(kc.describe()) {
      EncodeOptions e;
      e.key_class = kc;
      for (std::size_t n : {items.size(), std::size_t{1}}) {
        // with a bytes leaf: framed; the second item alone: legacy
        std::vector<Item> some = n == 1 ? std::vector<Item>{items[1]} : items;
        auto bytes = encode_segment(some, e);
        std::string text(bytes.begin(), bytes.end());
        BOOST_TEST(text.find("\x8c\x08ShardKey\x93\x94)\x81") != std::string::npos);
        // The class is written once; the second instance fetches memo entry 0 (SPEC 2.3).
        BOOST_TEST(text.find("ShardKey") == text.rfind("ShardKey"));
        BOOST_TEST((text.find("h\x00)\x81"sv) != std::string::npos) == (n > 1));
        BOOST_TEST((text.find("\x8c\x05shard") != std::string::npos) ==
                   (kc.state == KeyClass::State::dict));
        DecodeOptions d;
        d.pickle.key_class = kc;
        auto back = decode_segment(std::span<const std::uint8_t>(bytes), d);
        BOOST_REQUIRE_EQUAL(back.size(), some.size());
        for (std::size_t i = 0; i < some.size(); ++i) {
          BOOST_TEST((back[i].first == some[i].first), i);
          BOOST_TEST((back[i].second == some[i].second), i);
        }
        // Read under the other state, or the default class: refused, never misread.
        DecodeOptions other = d;
        other.pickle.key_class.state =
            kc.state == KeyClass::State::dict ? KeyClass::State::values : KeyClass::State::dict;
        HPREF_CHECK_ERROR(decode_segment(std::span<const std::uint8_t>(bytes), other),
                          Errc::pickle_reduce, "BUILD state of app.keys.ShardKey");
        HPREF_CHECK_ERROR(decode_segment(std::span<const std::uint8_t>(bytes)), Errc::pickle_global,
                          "app.keys.ShardKey");
      }
    }
  }
  // With the default fields only valid SampleKeys become objects (the values state too).
  EncodeOptions e;
  e.key_class =
      KeyClass(std::string(kDefaultKeyClass), {"sample_id", "position"}, KeyClass::State::values);
  std::vector<Item> keys = {{T({S("doc"), I(2)}), I(1)}, {T({I(-1), I(0)}), I(2)}};
  auto bytes = encode_segment(keys, e);
  std::string text(bytes.begin(), bytes.end());
  BOOST_TEST(text.find("SampleKey") != std::string::npos);
  BOOST_TEST(text.find("SampleKey") == text.rfind("SampleKey"));  // one object
  DecodeOptions d;
  d.pickle.key_class = e.key_class;
  auto back = decode_segment(std::span<const std::uint8_t>(bytes), d);
  BOOST_TEST((back[0].first == keys[0].first));
  BOOST_TEST((back[1].first == keys[1].first));
}

BOOST_AUTO_TEST_CASE(frame_batch_key_fields_and_key_state) {
  auto answer = [](std::string_view line) {
    return cli::parse_json(cli::dump_json(cli::answer_line(line, cli::handle_frame_request)));
  };
  cli::Json enc =
      answer(R"({"op":"encode_segment","key_class":"app.keys.SlotKey","key_fields":["a","b","c"],)"
             R"("key_state":"values","items":[[{"tuple":[1,"x",null]},7]]})");
  BOOST_REQUIRE(enc["ok"].get<bool>());
  std::string hex = enc["frame_hex"].get<std::string>();
  // ... SlotKey STACK_GLOBAL EMPTY_TUPLE NEWOBJ EMPTY_LIST MARK 1 'x' None APPENDS BUILD
  BOOST_TEST(hex.find(hpref::test::hex("\x93\x94)\x81](K\x01\x8c\x01xNeb"s)) != std::string::npos);
  cli::Json dec = answer(R"({"op":"decode_segment","key_class":"app.keys.SlotKey",)"
                         R"("key_fields":["a","b","c"],"key_state":"values","frame_hex":")" +
                         hex + "\"}");
  BOOST_TEST(cli::dump_json(dec) == R"({"ok": true, "items": [[{"tuple": [1, "x", null]}, 7]]})");
  // Fields under the default class name when decoding; refused when encoding without one.
  cli::Json refused =
      answer(R"({"op":"decode_segment","key_fields":["a","b","c"],"frame_hex":")" + hex + "\"}");
  BOOST_TEST(refused["kind"].get<std::string>() == "pickle_global");
  refused = answer(R"({"op":"encode_segment","key_state":"values","items":[]})");
  BOOST_TEST(refused["kind"].get<std::string>() == "invalid_request");
  BOOST_TEST(refused["error"].get<std::string>().find("need \"key_class\"") != std::string::npos);
  refused = answer(
      R"({"op":"pickle_read","pickle_hex":"80054e2e","key_class":"m.K","key_state":"list"})");
  BOOST_TEST(refused["kind"].get<std::string>() == "invalid_argument");
  refused = answer(
      R"({"op":"pickle_read","pickle_hex":"80054e2e","key_class":"m.K","key_fields":"a,b"})");
  BOOST_TEST(refused["kind"].get<std::string>() == "invalid_request");
  refused = answer(
      R"({"op":"pickle_read","pickle_hex":"80054e2e","key_class":"m.K","key_fields":["a","a"]})");
  BOOST_TEST(refused["error"].get<std::string>().find("names field 'a' twice") !=
             std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
