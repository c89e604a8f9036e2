// hpref._core, codec (SPEC 1-2): segments to Python objects and back. Values cross as the
// Python objects the original's pickle.loads gives; tensors as RawTensors (common.hpp)
// whose bytes view the segment, or, going in, the caller's tensor memory, without a copy.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common.hpp"
#include "hpref/codec.hpp"
#include "hpref/detail/value_access.hpp"
#include "hpref/dtype.hpp"
#include "hpref/error.hpp"
#include "hpref/inspect.hpp"
#include "hpref/sample_key.hpp"
#include "hpref/shared_bytes.hpp"
#include "hpref/tensor.hpp"
#include "hpref/utf8.hpp"
#include "hpref/value.hpp"

namespace hpref::py {

std::string utf8_text(nb::handle str) {
  if (!PyUnicode_Check(str.ptr())) return repr_text(str);
  Py_ssize_t size = 0;
  if (const char* utf8 = PyUnicode_AsUTF8AndSize(str.ptr(), &size))
    return std::string(utf8, static_cast<std::size_t>(size));
  PyErr_Clear();  // a lone surrogate
  nb::object escaped = nb::steal(PyUnicode_AsEncodedString(str.ptr(), "utf-8", "backslashreplace"));
  if (!escaped.is_valid()) throw nb::python_error();
  return std::string(PyBytes_AS_STRING(escaped.ptr()),
                     static_cast<std::size_t>(PyBytes_GET_SIZE(escaped.ptr())));
}

std::string repr_text(nb::handle o) { return utf8_text(nb::repr(o)); }

std::string str_text(nb::handle o) { return utf8_text(nb::str(o)); }

std::string py_type_name(nb::handle o) { return utf8_text(o.type().attr("__qualname__")); }

std::optional<Errc> errc_named(std::string_view kind) {
#define HPREF_KIND_MATCH(name) \
  if (kind == #name) return Errc::name;
  HPREF_ERROR_KINDS(HPREF_KIND_MATCH)
#undef HPREF_KIND_MATCH
  return std::nullopt;
}

std::optional<Error> hpref_error_of(nb::python_error& e) {
  nb::handle value = e.value();
  nb::object error_type = nb::module_::import_("hpref.errors").attr("Error");
  nb::object kind = nb::getattr(value, "kind", nb::none());
  if (PyObject_IsInstance(value.ptr(), error_type.ptr()) != 1 || !PyUnicode_Check(kind.ptr())) {
    PyErr_Clear();  // IsInstance may have failed: the caller rethrows e itself
    return std::nullopt;
  }
  std::optional<Errc> code = errc_named(utf8_text(kind));
  if (!code) return std::nullopt;
  return Error(*code, str_text(value));
}

namespace {

// A Python buffer held for as long as a SharedBytes views it; released with the GIL held.
struct HeldBuffer {
  Py_buffer view{};
  ~HeldBuffer() {
    nb::gil_scoped_acquire gil;
    PyBuffer_Release(&view);
  }
};

// Views `object`'s bytes (PyBUF_SIMPLE: C-contiguous) without a copy; writable only when
// asked. nullopt (Python error cleared) when the object cannot give such a buffer.
std::optional<SharedBytes> view_buffer(nb::handle object, bool writable) {
  auto held = std::make_shared<HeldBuffer>();
  if (PyObject_GetBuffer(object.ptr(), &held->view, writable ? PyBUF_WRITABLE : PyBUF_SIMPLE) !=
      0) {
    PyErr_Clear();
    held->view.obj = nullptr;  // nothing to release
    return std::nullopt;
  }
  std::span<const std::uint8_t> bytes(static_cast<const std::uint8_t*>(held->view.buf),
                                      static_cast<std::size_t>(held->view.len));
  return SharedBytes(std::move(held), bytes);
}

// The segment bytes of `buffer`: its own memory when it is writable (tensors decoded from
// it are writable views sharing it, as the original's are views of its bytearray) unless
// `copy`; otherwise one private copy.
SharedBytes segment_bytes(nb::handle buffer, bool copy) {
  if (!copy) {
    if (auto view = view_buffer(buffer, /*writable=*/true)) return *view;
  }
  auto view = view_buffer(buffer, /*writable=*/false);
  if (!view) {
    throw Error(Errc::invalid_argument,
                "a segment must be bytes, a C-contiguous buffer (bytearray, memoryview, "
                "numpy uint8 array) or a contiguous CPU torch.uint8 tensor, got a Python " +
                    py_type_name(buffer));
  }
  return SharedBytes::copy_of(view->span());
}

// Torch's complex128 (c10::complex<double>, alignas(16)) kills the process with SIGSEGV when
// its bytes are not 16-byte aligned: clone, sum, repr, copy_ (torch 2.13 and 1.13; found by
// tests/python/test_decode_fuzz.py; no other dtype did at any offset). A segment's tensors lie
// where the peer's metadata put them: such a tensor goes to make_torch (hpref/_tensors.py),
// which makes it from an aligned private copy.
bool misaligned_complex128(const Tensor& t) {
  return t.dtype() == DType::complex128 &&
         reinterpret_cast<std::uintptr_t>(t.storage().data()) % 16 != 0;
}

struct Converter {
  TensorViews& tensors;
  // Bytes this conversion may copy into new Python objects (str, bytes, bytearray, an
  // aligned copy of a complex128 tensor; the latter charged whatever the tensor maker,
  // though only torch's copies): the input's size plus 1 MiB. What an encoder
  // writes copies each byte of the segment at most once; the C++ Value shares what the
  // memo or overlapping ranges repeat, but a bytearray is mutable, so each place gets its
  // own, and each distinct range of the binary region becomes its own bytes: a 1 MiB
  // segment of overlapping ranges, or of one bytearray fetched from the memo 2000 times,
  // became 2 GB of Python objects (SPEC 2.4: memory a small multiple of the input).
  static constexpr std::size_t kCopySlack = std::size_t{1} << 20;
  std::size_t copy_budget;
  mutable std::size_t copied = 0;
  nb::object bytearray_type = nb::module_::import_("builtins").attr("bytearray");

  void copying(std::size_t n) const {
    copied += n;
    if (copied > copy_budget) {
      throw Error(Errc::decode_copy_limit,
                  "decoding into Python objects would copy more than " +
                      std::to_string(copy_budget) +
                      " bytes into str, bytes and bytearray objects (the input's " +
                      std::to_string(copy_budget - kCopySlack) +
                      " bytes plus 1 MiB): byte ranges that overlap, or one bytearray "
                      "referenced from many places, repeat the same bytes (SPEC 2.4)");
    }
  }
  // One Python object per shared str or bytes storage: a memo reference (BINGET) copies a
  // Value by sharing its bytes, so a long string fetched into many places would otherwise
  // become as many Python copies - memory past any multiple of the input (SPEC 2.4). Both
  // types are immutable, and pickle.loads shares the object the same way.
  // Keyed by (address, size), since two bytes leaves may start at one offset of the binary
  // region with different sizes (overlapping ranges are accepted, SPEC 2.4), and hashed with
  // the process's SipHash key: the address is the buffer's plus an offset the peer chose, so
  // no std::hash (wire-format.md, "Hashing"). Unordered: 10,000 bytes leaves of 64 bytes or
  // more, each its own entry, decoded 1.3x slower through a std::map.
  struct StorageHash {
    std::size_t operator()(const std::pair<const void*, std::size_t>& k) const noexcept {
      const std::uint64_t words[2] = {reinterpret_cast<std::uintptr_t>(k.first), k.second};
      return seeded_hash(std::string_view(reinterpret_cast<const char*>(words), sizeof words));
    }
  };
  mutable std::unordered_map<std::pair<const void*, std::size_t>, nb::object, StorageHash> shared{};
  static constexpr std::size_t kShareFrom = 64;

  // Short ones are shared only when their Value was copied: a memo fetch (the writer
  // memoizes every repeated mapping key, SPEC 2.3), where pickle.loads gives one object
  // too, and one str then hashes once for every dict it keys. On the fast path that is
  // the only copy; the general reader also shares equal strs of up to 32 bytes that were
  // not memoized (pickle_reader.cpp), which pickle.loads makes distinct: only `is` tells
  // (docs/python.md). A str of its own is made directly (a lookup would cost its copy).
  template <class Make>
  nb::object once(const Value& v, const void* storage, std::size_t size, Make make) const {
    if (size < kShareFrom && detail::ValueAccess::use_count(v) <= 1) {
      copying(size);
      return make();
    }
    auto [it, fresh] = shared.try_emplace({storage, size});
    if (fresh) {
      copying(size);
      it->second = make();
    }
    return it->second;
  }

  // One Python tuple per shared tuple node (a memo reference, or a schema node referenced
  // twice) that holds nothing mutable: a tuple of depth d nesting pairs of one memoized
  // tuple is 2^d logical nodes from a few hundred bytes, which became as many Python
  // tuples (8 Mi of them, 680 MB, from a 118-byte legacy segment). pickle.loads shares
  // such a tuple the same way. A tuple holding a list, dict, bytearray or tensor is made
  // anew at each use: the original's decoder makes a fresh one at each schema reference,
  // and sharing it would alias what the caller may change.
  mutable std::unordered_map<const void*, nb::object> tuples{};
  mutable bool made_mutable = false;  // set by every list, dict, bytearray or tensor made

  nb::object tuple(const Value& v) const {
    bool shared = detail::ValueAccess::use_count(v) > 1;
    if (shared) {
      if (auto it = tuples.find(v.node_identity()); it != tuples.end()) return it->second;
    }
    bool outer = std::exchange(made_mutable, false);
    nb::object out = nb::steal(PyTuple_New(static_cast<Py_ssize_t>(v.items().size())));
    Py_ssize_t i = 0;
    for (const Value& item : v.items())
      PyTuple_SET_ITEM(out.ptr(), i++, (*this)(item).release().ptr());
    if (shared && !made_mutable) tuples.emplace(v.node_identity(), out);
    made_mutable = made_mutable || outer;
    return out;
  }

  nb::object operator()(const Value& v) const {
    switch (v.kind()) {
      case ValueKind::none:
        return nb::none();
      case ValueKind::boolean:
        return nb::bool_(v.as_bool());
      case ValueKind::integer:
        return nb::int_(v.as_int());
      case ValueKind::floating:
        return nb::float_(v.as_float());
      case ValueKind::string: {
        std::string_view s = v.as_str();
        return once(v, s.data(), s.size(), [&] { return nb::str(s.data(), s.size()); });
      }
      case ValueKind::bytes: {
        auto b = v.as_bytes();
        return once(v, b.data(), b.size(), [&] { return nb::bytes(b.data(), b.size()); });
      }
      case ValueKind::bytearray:
        made_mutable = true;
        copying(v.as_bytes().size());
        return nb::steal(
            PyByteArray_FromStringAndSize(reinterpret_cast<const char*>(v.as_bytes().data()),
                                          static_cast<Py_ssize_t>(v.as_bytes().size())));
      case ValueKind::tensor:
        made_mutable = true;
        if (misaligned_complex128(v.as_tensor())) copying(v.as_tensor().storage().size());
        return tensors(v.as_tensor());
      case ValueKind::tuple:
        return tuple(v);
      case ValueKind::list: {
        made_mutable = true;
        nb::object out = nb::steal(PyList_New(static_cast<Py_ssize_t>(v.items().size())));
        Py_ssize_t i = 0;
        for (const Value& item : v.items())
          PyList_SET_ITEM(out.ptr(), i++, (*this)(item).release().ptr());
        return out;
      }
      case ValueKind::mapping: {
        made_mutable = true;
        nb::dict out;
        for (const auto& [key, value] : v.entries()) out[(*this)(key)] = (*this)(value);
        return out;
      }
    }
    throw Error(Errc::internal, "unknown value kind");
  }
};

// How item keys come back (SPEC 1.4), for a key that is a tuple of `arity` items (for the
// default fields, only a valid SampleKey); other keys as decoded. `make`:
//   None                      keys as decoded;
//   a tuple subclass (Key)    tuple.__new__(make, fields), what a NamedTuple's __new__ does;
//   a KeyClass                object.__new__(cls) and object.__setattr__ per field, in field
//                             order: KeyClass.make's way (pickle's NEWOBJ + BUILD), in C;
//                             cls is read from its `type` when the first key needs it.
// Key-class field names as interned strs (attribute lookups compare interned names first).
std::vector<nb::object> interned_names(nb::handle names) {
  std::vector<nb::object> out;
  for (nb::handle f : names) {
    if (!PyUnicode_Check(f.ptr())) {
      throw Error(Errc::invalid_argument,
                  "a key class field name must be a str, got " + repr_text(f));
    }
    PyObject* name = f.ptr();
    Py_INCREF(name);
    PyUnicode_InternInPlace(&name);
    out.push_back(nb::steal(name));
  }
  return out;
}

struct KeyMaker {
  nb::object make;
  std::size_t arity = 2;
  bool sample_key_rule = true;
  mutable nb::object cls{};                  // the KeyClass's class, once resolved
  mutable std::vector<nb::object> fields{};  // its field names, interned

  nb::object operator()(const Value& key, const Converter& c) const;
  nb::object instance(const nb::object& values) const;
};

nb::object KeyMaker::instance(const nb::object& values) const {
  if (!cls.is_valid()) {
    cls = make.attr("type");
    if (!PyType_Check(cls.ptr())) {  // hpref.KeyClass.type refuses a non-class itself, first
      throw Error(Errc::invalid_argument, "the key class's type is not a class");
    }
    fields = interned_names(make.attr("fields"));
  }
  static PyObject* no_args = PyTuple_New(0);
  // A class whose instances pickle's NEWOBJ + BUILD cannot make (builtins.int: no fields to
  // set) is the caller's mistake, named as such, not a bare AttributeError from here.
  auto unmakeable = [&] {
    nb::python_error e;
    throw Error(Errc::invalid_argument,
                "key class " + utf8_text(cls.attr("__module__")) + "." +
                    utf8_text(cls.attr("__qualname__")) +
                    ": its instances cannot be made as pickle makes them (object.__new__, then "
                    "each field set): " +
                    e.what());
  };
  nb::object obj = nb::steal(
      PyBaseObject_Type.tp_new(reinterpret_cast<PyTypeObject*>(cls.ptr()), no_args, nullptr));
  if (!obj.is_valid()) unmakeable();
  for (std::size_t i = 0; i < fields.size() && i < arity; ++i) {
    if (PyObject_GenericSetAttr(obj.ptr(), fields[i].ptr(),
                                PyTuple_GET_ITEM(values.ptr(), static_cast<Py_ssize_t>(i))) != 0) {
      unmakeable();
    }
  }
  return obj;
}

nb::object KeyMaker::operator()(const Value& key, const Converter& c) const {
  if (!make.is_none() && key.is(ValueKind::tuple) && key.items().size() == arity &&
      (!sample_key_rule || SampleKey::from_value(key))) {
    nb::object values = c(key);
    if (!PyType_Check(make.ptr())) return instance(values);
    nb::object args = nb::steal(PyTuple_Pack(1, values.ptr()));
    if (!args.is_valid()) throw nb::python_error();
    PyObject* made =
        PyTuple_Type.tp_new(reinterpret_cast<PyTypeObject*>(make.ptr()), args.ptr(), nullptr);
    if (made == nullptr) throw nb::python_error();
    return nb::steal(made);
  }
  return c(key);
}

// [(key, value), ...] of decoded items.
// The cyclic garbage collector paused while many containers are made at once: each 700
// new containers would otherwise start a collection that walks every live object (it was
// most of the time of decoding 10,000 small items). Nothing made here can form a cycle.
class GcPause {
 public:
  GcPause() : was_enabled_(PyGC_Disable() == 1) {}
  ~GcPause() {
    if (was_enabled_) PyGC_Enable();
  }
  GcPause(const GcPause&) = delete;
  GcPause& operator=(const GcPause&) = delete;

 private:
  bool was_enabled_;
};

nb::list items_to_python(const std::vector<Item>& items, const KeyMaker& keys,
                         nb::handle make_tensor, const SharedBytes& buffer) {
  TensorViews views(make_tensor, &buffer);
  Converter convert{views, buffer.size() + Converter::kCopySlack};
  GcPause pause;
  nb::object out = nb::steal(PyList_New(static_cast<Py_ssize_t>(items.size())));
  Py_ssize_t i = 0;
  for (const auto& [key, value] : items) {
    PyList_SET_ITEM(out.ptr(), i++,
                    nb::make_tuple(keys(key, convert), convert(value)).release().ptr());
  }
  return nb::borrow<nb::list>(out);
}

// Everything `decode` and `decode_received` share: options and the key maker.
struct DecodeArgs {
  DecodeOptions options;
  KeyMaker keys;
};

// The key class the Python layer describes (hpref.codec.KeyClass._core_spec): a dotted
// name (default fields, dict state) or (name, [fields], state).
KeyClass key_class_from_python(nb::handle spec) {
  if (PyUnicode_Check(spec.ptr())) return KeyClass(nb::cast<std::string>(spec));
  auto [name, fields, state] =
      nb::cast<std::tuple<std::string, std::vector<std::string>, std::string>>(spec);
  KeyClass kc(std::move(name), std::move(fields), parse_key_state(state));
  kc.validate();
  return kc;
}

DecodeArgs decode_args(bool strict, const nb::object& key_class, const nb::object& make_key,
                       std::size_t key_arity, bool sample_key_rule) {
  DecodeArgs a;
  a.options.strict = strict;
  a.options.pickle.key_class =
      key_class.is_none() ? KeyClass(kDefaultKeyClass) : key_class_from_python(key_class);
  a.keys = KeyMaker{make_key, key_arity, sample_key_rule};
  return a;
}

// References to the Python objects whose bytes one encode call reads in place, dropped
// together, with the GIL held, when the last Value viewing them goes: per tensor a
// reference and a shared count, not an allocation and a GIL check each.
struct HeldObjects {
  HeldObjects() = default;
  HeldObjects(const HeldObjects&) = delete;
  HeldObjects& operator=(const HeldObjects&) = delete;
  std::vector<PyObject*> objects;
  ~HeldObjects() {
    nb::gil_scoped_acquire gil;
    for (PyObject* o : objects) Py_DECREF(o);
  }
};

// Attribute and method names looked up on every tensor and key, made (and hashed) once:
// PyObject_GetAttrString would build and hash a fresh str per lookup.
struct Names {
  PyObject* dtype = PyUnicode_InternFromString("dtype");
  PyObject* is_cpu = PyUnicode_InternFromString("is_cpu");
  PyObject* is_neg = PyUnicode_InternFromString("is_neg");
  PyObject* is_conj = PyUnicode_InternFromString("is_conj");
  PyObject* is_contiguous = PyUnicode_InternFromString("is_contiguous");
  PyObject* shape = PyUnicode_InternFromString("shape");
  PyObject* data_ptr = PyUnicode_InternFromString("data_ptr");
};
const Names& names() {
  static const Names* n = new Names();  // never freed: the interpreter owns interned strs
  return *n;
}

nb::object get_attr(nb::handle o, PyObject* name) {
  PyObject* r = PyObject_GetAttr(o.ptr(), name);
  if (r == nullptr) throw nb::python_error();
  return nb::steal(r);
}

nb::object call_method(nb::handle o, PyObject* name) {
  PyObject* r = PyObject_CallMethodNoArgs(o.ptr(), name);
  if (r == nullptr) throw nb::python_error();
  return nb::steal(r);
}

// `r` (a new reference or null) as an object; null clears the error and is an invalid object:
// what a probe that leaves the tensor to the general path does with a call that failed.
nb::object or_cleared(PyObject* r) {
  if (r == nullptr) PyErr_Clear();
  return nb::steal(r);
}

bool truth(const nb::object& o) {
  int t = PyObject_IsTrue(o.ptr());
  if (t < 0) throw nb::python_error();
  return t == 1;
}

// A CPU, contiguous, non-quantized torch tensor's bytes read in place through data_ptr()
// (a Python-level conversion costs ~7 us a tensor, this well under 1); nullopt for any other
// tensor, which then takes the general path (hpref._tensors.to_raw).
std::optional<Value> torch_tensor_in_place(nb::handle o, const std::shared_ptr<HeldObjects>& held) {
  static std::unordered_map<PyObject*, std::optional<DType>> dtypes;  // torch dtypes are singletons
  const Names& n = names();
  nb::object dtype_object = get_attr(o, n.dtype);
  auto found = dtypes.find(dtype_object.ptr());
  if (found == dtypes.end()) {
    std::string name = nb::cast<std::string>(nb::str(dtype_object));
    std::optional<DType> dtype;
    if (name.rfind("torch.", 0) == 0)
      dtype = dtype_from_bare_name(std::string_view(name).substr(6));
    if (dtype && is_quantized(*dtype)) dtype.reset();  // the general path says what torch says
    found = dtypes.emplace(dtype_object.inc_ref().ptr(), dtype).first;
  }
  if (!found->second) return std::nullopt;
  DType dtype = *found->second;
  if (!truth(get_attr(o, n.is_cpu)) || truth(call_method(o, n.is_neg)) ||
      ((dtype == DType::complex32 || dtype == DType::complex64 || dtype == DType::complex128) &&
       truth(call_method(o, n.is_conj)))) {
    return std::nullopt;
  }
  // A call that fails leaves the tensor to the general path, which names what it is: sparse
  // and other layouts have no strides, a nested tensor no shape, torch 1.13's nested and
  // sparse CSR tensors no storage (data_ptr below).
  nb::object contiguous = or_cleared(PyObject_CallMethodNoArgs(o.ptr(), n.is_contiguous));
  if (!contiguous.is_valid() || !truth(contiguous)) return std::nullopt;
  nb::object dims = or_cleared(PyObject_GetAttr(o.ptr(), n.shape));  // torch.Size: ints
  if (!dims.is_valid() || !PyTuple_Check(dims.ptr())) return std::nullopt;
  std::vector<std::int64_t> shape(static_cast<std::size_t>(PyTuple_GET_SIZE(dims.ptr())));
  std::size_t numel = 1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    shape[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(dims.ptr(), static_cast<Py_ssize_t>(i)));
    if (shape[i] == -1 && PyErr_Occurred()) throw nb::python_error();
    numel *= static_cast<std::size_t>(shape[i]);
  }
  std::size_t size = numel * element_size(dtype);
  if (size == 0) return Value::tensor(Tensor(dtype, std::move(shape), SharedBytes()));
  nb::object address_object = or_cleared(PyObject_CallMethodNoArgs(o.ptr(), n.data_ptr));
  if (!address_object.is_valid()) return std::nullopt;
  auto address = static_cast<std::uintptr_t>(PyLong_AsUnsignedLongLong(address_object.ptr()));
  if (PyErr_Occurred()) throw nb::python_error();
  if (address == 0) return std::nullopt;  // no storage here: the general path asks torch
  held->objects.push_back(o.inc_ref().ptr());
  const auto* data = reinterpret_cast<const std::uint8_t*>(address);
  SharedBytes bytes(std::shared_ptr<const void>(held, data), {data, size});
  return Value::tensor(Tensor(dtype, std::move(shape), std::move(bytes)));
}

// A conversion error below an item's key or value: the steps down to the object that could
// not be converted ("[0][\"image\"]", as the C++ encoder spells paths, SPEC 2.6), collected
// as the error unwinds, so nothing is built unless one happens.
struct PathError {
  Errc code;
  std::string message;
  std::vector<std::string> steps;  // innermost first: the 8 deepest, then the 8 outermost
  std::size_t elided = 0;          // steps left out between them (a chain 1000 deep)

  void up(std::string step) {
    if (step.empty()) return;  // the item's key or value itself
    steps.push_back(std::move(step));
    if (steps.size() > 16) {
      steps.erase(steps.begin() + 8);
      ++elided;
    }
  }
  std::string path() const {
    std::string out;
    for (std::size_t i = steps.size(); i-- > 0;) {
      out += steps[i];
      if (i == 8 && elided > 0) out += "[... " + std::to_string(elided) + " more ...]";
    }
    return out;
  }
};

// convert(), with its error (ours, an hpref.Error from Python code such as hpref._tensors,
// or a PathError from further down) taken one step `step()` further from the item.
template <class Convert, class Step>
Value below(Convert&& convert, Step&& step) {
  try {
    return convert();
  } catch (const Error& e) {
    PathError up{e.code(), e.what(), {}};
    up.up(step());
    throw up;
  } catch (PathError& e) {
    e.up(step());
    throw;
  } catch (nb::python_error& e) {
    std::optional<Error> error = hpref_error_of(e);
    if (!error) throw;
    PathError up{error->code(), error->what(), {}};
    up.up(step());
    throw up;
  }
}

// The step to the value under mapping key `k`: ["text"] for a str (the first 40 bytes),
// else [repr(k)]; a key that itself fails is reached through [key repr(k)].
std::string key_step(nb::handle k, bool to_key) {
  std::string text = PyUnicode_Check(k.ptr()) && !to_key ? utf8_text(k) : repr_text(k);
  if (text.size() > 40) text = std::string(utf8_prefix(text, 40)) + "...";
  if (to_key) return "[key " + text + "]";
  return PyUnicode_Check(k.ptr()) ? "[\"" + text + "\"]" : "[" + text + "]";
}

// The type of `o` as module.qualname ("numpy.bool", not "bool", which would name a type
// that is accepted), builtins' bare.
std::string module_type_name(nb::handle o) {
  nb::object module = nb::getattr(o.type(), "__module__", nb::none());
  std::string name = py_type_name(o);
  if (!PyUnicode_Check(module.ptr())) return name;
  std::string prefix = utf8_text(module);
  return prefix == "builtins" ? name : prefix + "." + name;
}

// A Python object as a Value (SPEC 1.1): None, bool, int (int64), float, str, bytes,
// bytearray, tuple, list, dict; any other object goes through `convert(o)`, which returns
// a RawTensor-like object (or a replacement Value-able object) or None for "not encodable".
struct FromPython {
  nb::handle raw_type;
  nb::handle convert;
  nb::handle torch_tensor;  // torch.Tensor, or None when torch is not imported
  nb::handle mapping_type;  // collections.abc.Mapping
  // Mapping-key strs already converted, by object: the same key str in every item's dict
  // becomes one shared Value (no copy, no UTF-8 check, no allocation per item). Each entry
  // holds a reference, so no address is reused by another str during the call.
  mutable std::unordered_map<PyObject*, Value> key_strs{};
  std::shared_ptr<HeldObjects> held = std::make_shared<HeldObjects>();  // tensors read in place
  // Tensors read in place whose bytes are not copied yet. The original copies each tensor's
  // bytes as it reaches it; ours are read when the segment is written, so before any call
  // that may run the user's Python code (a Mapping's items(), the conversion callback, a
  // subclass's __iter__ or __class__, an ABC or key-class check, a key field's getattr),
  // which could change or free a tensor already read, settle() copies them. A conversion
  // that runs none (dicts, lists, tuples, scalars, torch tensors) keeps every tensor in place.
  // numpy arrays and RawTensors' data too: the original has none, but a tensor of ours is
  // encoded as it was when reached, whatever made it.
  mutable std::vector<const Tensor*> pending{};

  FromPython(nb::handle raw, nb::handle conv, nb::handle torch, nb::handle mapping)
      : raw_type(raw), convert(conv), torch_tensor(torch), mapping_type(mapping) {}
  FromPython(const FromPython&) = delete;
  FromPython& operator=(const FromPython&) = delete;
  ~FromPython() {
    for (auto& [object, value] : key_strs) Py_DECREF(object);
  }

  Value str(PyObject* p) const {
    Py_ssize_t size = 0;
    const char* utf8 = PyUnicode_AsUTF8AndSize(p, &size);
    if (!utf8) {
      PyErr_Clear();
      throw Error(Errc::invalid_utf8,
                  "a str that is not valid UTF-8 (a lone surrogate) cannot be encoded");
    }
    return Value::string(std::string_view(utf8, static_cast<std::size_t>(size)));
  }

  // The pending tensors' bytes copied now (see `pending`). The Tensor objects live in their
  // Values' heap nodes (made non-const by Value::tensor), so they are replaced in place.
  void settle() const {
    for (const Tensor* t : pending) {
      const_cast<Tensor&>(*t) =
          Tensor(t->dtype(), t->shared_shape(), SharedBytes::copy_of(t->bytes()), t->device());
    }
    pending.clear();
  }

  // Calls `fn` on each element of `o`, in its iteration order. Iterating an exact list or
  // tuple runs no Python code; any other iterable's __iter__ and __next__ may be the user's
  // (a generator in a list subclass, a Mapping's ItemsView reading __getitem__), run between
  // two elements, after the first one's tensors were read: so each step is settled first.
  template <class F>
  void each(nb::handle o, F&& fn) const {
    PyObject* p = o.ptr();
    if (PyList_CheckExact(p) || PyTuple_CheckExact(p)) {
      for (nb::handle x : o) fn(x);
      return;
    }
    settle();
    nb::object it = nb::steal(PyObject_GetIter(p));
    if (!it.is_valid()) throw nb::python_error();
    for (;;) {
      settle();
      nb::object x = nb::steal(PyIter_Next(it.ptr()));
      if (!x.is_valid()) {
        if (PyErr_Occurred()) throw nb::python_error();
        return;
      }
      fn(x);
    }
  }

  // A Value of an in-place tensor, remembered until settled.
  Value in_place(Value v) const {
    if (!v.as_tensor().storage().empty()) pending.push_back(&v.as_tensor());
    return v;
  }

  Value key(PyObject* k, int depth) const {
    if (!PyUnicode_CheckExact(k)) return (*this)(k, depth);
    auto found = key_strs.find(k);
    if (found != key_strs.end()) return found->second;
    Value v = str(k);
    Py_INCREF(k);
    key_strs.emplace(k, v);
    return v;
  }

  Value operator()(nb::handle o, int depth) const {
    if (depth > 1000) throw Error(Errc::depth_limit, "nests deeper than 1000 levels");
    PyObject* p = o.ptr();
    if (p == Py_None) return Value::none();
    if (PyBool_Check(p)) return Value::boolean(p == Py_True);
    if (PyLong_Check(p)) {
      int overflow = 0;
      long long v = PyLong_AsLongLongAndOverflow(p, &overflow);
      if (overflow) {
        throw Error(Errc::invalid_argument,
                    "int " + str_text(o) + " does not fit in 64 bits (SPEC 1.1)");
      }
      return Value::integer(v);
    }
    if (PyFloat_Check(p)) return Value::floating(PyFloat_AsDouble(p));
    if (PyUnicode_Check(p)) return str(p);
    if (PyBytes_Check(p)) {
      return Value::bytes(
          std::string_view(PyBytes_AS_STRING(p), static_cast<std::size_t>(PyBytes_GET_SIZE(p))));
    }
    if (PyByteArray_Check(p)) {
      auto* b = reinterpret_cast<const std::uint8_t*>(PyByteArray_AS_STRING(p));
      return Value::bytearray(
          std::span<const std::uint8_t>(b, static_cast<std::size_t>(PyByteArray_GET_SIZE(p))));
    }
    // A RawTensor is a NamedTuple: checked before tuples.
    if (PyTuple_Check(p)) {
      if (!PyTuple_CheckExact(p)) settle();  // a subclass's __class__ may be the user's code
      int raw = PyObject_IsInstance(p, raw_type.ptr());
      if (raw < 0) throw nb::python_error();  // a __class__ that raises: the user's error
      // Its data (a numpy array's, through `convert`) is read in place as a torch tensor's.
      if (raw) return in_place(Value::tensor(tensor_from_python(o)));
    }
    if (PyTuple_Check(p) || PyList_Check(p)) {
      std::vector<Value> items;
      items.reserve(static_cast<std::size_t>(PySequence_Fast_GET_SIZE(p)));
      std::size_t i = 0;
      each(o, [&](nb::handle x) {
        items.push_back(below([&] { return (*this)(x, depth + 1); },
                              [&] { return "[" + std::to_string(i) + "]"; }));
        ++i;
      });
      return PyTuple_Check(p) ? Value::tuple(std::move(items)) : Value::list(std::move(items));
    }
    if (PyDict_CheckExact(p)) {
      std::vector<Value::Entry> entries;
      entries.reserve(static_cast<std::size_t>(PyDict_Size(p)));
      Py_ssize_t pos = 0;
      PyObject* k = nullptr;
      PyObject* v = nullptr;
      while (PyDict_Next(p, &pos, &k, &v)) {
        nb::object held_key = nb::borrow(k), held_value = nb::borrow(v);  // `convert` may edit
        entries.push_back(entry(held_key, held_value, depth));
      }
      return Value::mapping(std::move(entries));
    }
    if (PyDict_Check(p)) return mapping_items(o, depth);
    // Exactly torch.Tensor: a subclass may hold no storage of its own (a wrapper subclass
    // such as MaskedTensor or DTensor: data_ptr() 0, read there until 2026-12-02) and goes
    // through hpref._tensors.to_raw, which asks torch for its dense bytes.
    if (Py_TYPE(p) == reinterpret_cast<PyTypeObject*>(torch_tensor.ptr())) {
      if (auto v = torch_tensor_in_place(o, held)) return in_place(std::move(*v));
    }
    settle();  // the callback and the ABC check below may run the user's code
    nb::object converted = convert(o);
    if (!converted.is_none()) return (*this)(converted, depth);
    // Checked last: an ABC's isinstance costs a call, which tensors and arrays need not pay.
    int mapping = PyObject_IsInstance(p, mapping_type.ptr());
    if (mapping < 0) throw nb::python_error();
    if (mapping) return mapping_items(o, depth);
    throw Error(Errc::unencodable_value, "a Python " + module_type_name(o) +
                                             " is not a SPEC 1.1 Value (None, bool, int, float, "
                                             "str, bytes, bytearray, tuple, list, mapping, "
                                             "tensor)");
  }

  // A mapping other than an exact dict (a dict subclass, a collections.abc.Mapping) in the
  // order its items() gives, as the original's encoder reads it: an OrderedDict after
  // move_to_end keeps its own order, which its dict storage does not.
  Value mapping_items(nb::handle o, int depth) const {
    settle();  // items() is the user's code
    std::vector<Value::Entry> entries;
    each(o.attr("items")(), [&](nb::handle pair) {
      PyObject* kv = pair.ptr();
      if (!(PyTuple_Check(kv) || PyList_Check(kv)) || PySequence_Fast_GET_SIZE(kv) != 2) {
        throw Error(Errc::unencodable_value, "the items() of a Python " + py_type_name(o) +
                                                 " gave " + repr_text(pair) +
                                                 ", not a (key, value) pair");
      }
      nb::object held_key = nb::borrow(PySequence_Fast_GET_ITEM(kv, 0));
      nb::object held_value = nb::borrow(PySequence_Fast_GET_ITEM(kv, 1));
      entries.push_back(entry(held_key, held_value, depth));
    });
    return Value::mapping(std::move(entries));
  }

  // One mapping entry, an error in it named by the path through the key.
  Value::Entry entry(nb::handle k, nb::handle v, int depth) const {
    Value converted_key =
        below([&] { return key(k.ptr(), depth + 1); }, [&] { return key_step(k, true); });
    return {std::move(converted_key),
            below([&] { return (*this)(v, depth + 1); }, [&] { return key_step(k, false); })};
  }
};

// An instance of the user's key class as the tuple of its field values (SPEC 1.4), read as
// hpref.codec.KeyClass.values reads them (isinstance, then getattr of each field, in order);
// nullopt for anything that is not an instance.
struct KeyFields {
  nb::handle type;                 // None: no key class
  std::vector<nb::object> fields;  // interned field names

  KeyFields(nb::handle key_type, nb::handle names) : type(key_type), fields(interned_names(names)) {
    default_fields = fields.size() == 2 && utf8_text(fields[0]) == "sample_id" &&
                     utf8_text(fields[1]) == "position";
  }
  bool default_fields = false;  // (sample_id, position): an instance must be a valid SampleKey

  // True when reading `key`'s fields runs none of the user's code, so the tensors read in
  // place need not be copied first: `key` is exactly of the key class (isinstance answers
  // without a call), whose attribute lookup is object's own, and no field name is a
  // descriptor with a __get__ of its own (a property) in the class: a field is then read
  // from the instance's __dict__ or a __slots__ member. A frozen dataclass is such a class.
  // Asked per key (the type lookups hit CPython's cache): the user's code run for an earlier
  // item may have changed the class.
  bool plain(PyObject* key) const {
    auto* cls = reinterpret_cast<PyTypeObject*>(type.ptr());
    if (Py_TYPE(key) != cls || cls->tp_getattro != PyObject_GenericGetAttr) return false;
    for (const nb::object& f : fields) {
      PyObject* d = _PyType_Lookup(cls, f.ptr());  // borrowed; sets no error
      if (d != nullptr && Py_TYPE(d)->tp_descr_get != nullptr && Py_TYPE(d) != &PyMemberDescr_Type)
        return false;
    }
    return true;
  }

  std::optional<Value> operator()(nb::handle key, const FromPython& from) const {
    if (type.is_none() || PyTuple_Check(key.ptr())) return std::nullopt;
    // The class check and the fields' getattr may run the user's code.
    if (!plain(key.ptr())) from.settle();
    int is = PyObject_IsInstance(key.ptr(), type.ptr());
    if (is < 0) throw nb::python_error();
    if (is == 0) return std::nullopt;
    std::vector<Value> values;
    values.reserve(fields.size());
    for (const nb::object& f : fields) values.push_back(from(get_attr(key, f.ptr()), 1));
    Value tuple = Value::tuple(std::move(values));
    if (default_fields && !SampleKey::from_value(tuple)) {
      // The encoder writes only valid SampleKeys in the class's pattern (SPEC 1.4): this
      // instance reached the receiver as a plain tuple, which its items[K(...)] misses.
      throw Error(Errc::invalid_sample_key,
                  "an instance of the key class " + utf8_text(type.attr("__qualname__")) +
                      " with sample_id " + repr_text(get_attr(key, fields[0].ptr())) +
                      " and position " + repr_text(get_attr(key, fields[1].ptr())) +
                      " is not a SampleKey (SPEC 1.4: sample_id a non-negative int or a "
                      "non-empty str, position a non-negative int), so it has no key-class form");
    }
    return tuple;
  }
};

}  // namespace

nb::object byte_view(const SharedBytes& bytes) {
  auto* keep = new SharedBytes(bytes);
  nb::capsule owner(keep, [](void* p) noexcept { delete static_cast<SharedBytes*>(p); });
  std::size_t shape[1] = {keep->size()};
  // Writable: the bytes are the caller's writable buffer or our private copy (segment_bytes).
  auto* data = const_cast<std::uint8_t*>(keep->data());
  nb::object array =
      nb::cast(nb::ndarray<nb::numpy, std::uint8_t, nb::ndim<1>>(data, 1, shape, owner));
  return nb::steal(PyMemoryView_FromObject(array.ptr()));
}

nb::object TensorViews::operator()(const Tensor& t) {
  const SharedBytes& storage = t.storage();
  nb::object data;
  if (!storage.empty() && storage.owner() && storage.owner().get() == owner_ &&
      storage.data() >= base_ && storage.data() + storage.size() <= base_ + size_) {
    // One memoryview per buffer, sliced per tensor (a slice costs ~0.1 us, a fresh view ~10).
    auto offset = static_cast<Py_ssize_t>(storage.data() - base_);
    data = nb::steal(PySequence_GetSlice(whole_.ptr(), offset,
                                         offset + static_cast<Py_ssize_t>(storage.size())));
    if (!data.is_valid()) throw nb::python_error();
  } else {
    data = byte_view(storage);  // empty, or the bytes of another buffer
  }
  nb::object dims = nb::steal(PyTuple_New(static_cast<Py_ssize_t>(t.dim())));
  Py_ssize_t i = 0;
  for (std::int64_t d : t.shape()) PyTuple_SET_ITEM(dims.ptr(), i++, PyLong_FromLongLong(d));
  auto index = static_cast<std::size_t>(t.dtype());  // the SPEC 1.3 table order (dtype_at)
  if (torch_ && storage.size() != 0 && !is_quantized(t.dtype()) && !misaligned_complex128(t)) {
    // make_torch's own steps, called from here: torch.frombuffer(data, dtype=kind), reshaped
    // unless one-dimensional. A dtype it lacks, and a quantized one (which it refuses), go to
    // make_torch, which names it; so does a misaligned complex128 (above), which it copies.
    if (!kind_looked_[index]) {
      std::string_view name = dtype_name(t.dtype());
      PyObject* kind = PyDict_GetItemString(kinds_.ptr(), std::string(name).c_str());
      kinds_of_[index] = kind == nullptr ? nb::object() : nb::borrow(kind);
      kind_looked_[index] = true;
    }
    if (kinds_of_[index].is_valid()) {
      PyObject* args[2] = {data.ptr(), kinds_of_[index].ptr()};
      nb::object flat = nb::steal(PyObject_Vectorcall(frombuffer_.ptr(), args, 1, dtype_kw_.ptr()));
      if (!flat.is_valid()) throw nb::python_error();
      if (t.dim() == 1) return flat;
      PyObject* reshape_args[2] = {flat.ptr(), dims.ptr()};
      nb::object shaped = nb::steal(PyObject_VectorcallMethod(
          reshape_name_.ptr(), reshape_args, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr));
      if (!shaped.is_valid()) throw nb::python_error();
      return shaped;
    }
  }
  if (!name_of_[index].is_valid()) {
    std::string_view name = dtype_name(t.dtype());
    name_of_[index] = nb::str(name.data(), name.size());
  }
  return make_(name_of_[index], dims, data);
}

TensorViews::TensorViews(nb::handle make, const SharedBytes* buffer) : make_(make) {
  if (buffer != nullptr && !buffer->empty()) {
    owner_ = buffer->owner().get();
    base_ = buffer->data();
    size_ = buffer->size();
    whole_ = byte_view(*buffer);
  }
  // hpref._tensors' torch maker says what it calls (its _hpref_torch attribute: torch.frombuffer
  // and its dtype table), so that tensors are made here without a Python frame per tensor.
  if (nb::hasattr(make, "_hpref_torch")) {
    nb::tuple how = nb::borrow<nb::tuple>(make.attr("_hpref_torch"));
    frombuffer_ = how[0];
    kinds_ = how[1];
    dtype_kw_ = nb::make_tuple("dtype");
    reshape_name_ = nb::str("reshape");
    torch_ = true;
  }
}

nb::object tensor_to_python(const Tensor& t, nb::handle make) {
  return TensorViews(make, nullptr)(t);
}

Tensor tensor_from_python(nb::handle raw) {
  // Every field is the caller's: checked here, named in the error (a dtype that was not a
  // str, or a dim past int64, escaped as std::bad_cast until 2026-12-02).
  nb::object dtype_name = raw.attr("dtype");
  if (!PyUnicode_Check(dtype_name.ptr())) {
    throw Error(Errc::invalid_dtype,
                "a RawTensor's dtype must be a str naming a SPEC 1.3 dtype "
                "('float32'), got " +
                    repr_text(dtype_name));
  }
  std::string name = utf8_text(dtype_name);
  if (name.rfind("torch.", 0) == 0) {
    throw Error(Errc::unsupported_dtype, "a RawTensor's dtype is named without 'torch.': '" +
                                             name.substr(6) + "', not '" + name + "'");
  }
  DType dtype = parse_dtype("torch." + name);
  nb::object dims = raw.attr("shape");
  if (!PyTuple_Check(dims.ptr()) && !PyList_Check(dims.ptr())) {
    throw Error(Errc::invalid_tensor,
                "a RawTensor's shape must be a tuple of ints, got " + repr_text(dims));
  }
  std::vector<std::int64_t> shape;
  for (nb::handle d : dims) {
    int overflow = 0;
    long long v = PyLong_Check(d.ptr()) && !PyBool_Check(d.ptr())
                      ? PyLong_AsLongLongAndOverflow(d.ptr(), &overflow)
                      : (overflow = 2, 0);
    if (overflow) {
      throw Error(Errc::invalid_tensor, (overflow == 2 ? "a tensor dim must be an int, got "
                                                       : "a tensor dim must fit in int64, got ") +
                                            repr_text(d));
    }
    shape.push_back(v);
  }
  nb::object data = raw.attr("data");
  auto bytes = view_buffer(data, /*writable=*/false);
  if (!bytes) {
    throw Error(Errc::invalid_tensor, "the bytes of a torch." + name +
                                          " tensor must be a C-contiguous buffer, got a Python " +
                                          py_type_name(data));
  }
  return Tensor(dtype, std::move(shape), std::move(*bytes));
}

void bind_codec(nb::module_& m) {
  m.def(
      "raw_tensor_checked",
      [](nb::handle raw) {
        Tensor t = tensor_from_python(raw);
        std::string_view name = dtype_name(t.dtype());
        nb::list shape;
        for (std::int64_t d : t.shape()) shape.append(d);
        return nb::make_tuple(nb::str(name.data(), name.size()), nb::tuple(shape));
      },
      nb::arg("raw"),
      "A caller's RawTensor checked as encode checks it (SPEC 1.3 dtype name, aliases "
      "included; dims >= 0; data a C-contiguous buffer of exactly numel x element size "
      "bytes): its canonical dtype name and shape, or the error encode raises.");
  m.def(
      "decode",
      [](nb::handle buffer, bool strict, nb::object key_class, nb::handle make_tensor,
         nb::object make_key, std::size_t key_arity, bool sample_key_rule, bool copy) {
        DecodeArgs a = decode_args(strict, key_class, make_key, key_arity, sample_key_rule);
        SharedBytes data = segment_bytes(buffer, copy);
        std::vector<Item> items;
        {
          nb::gil_scoped_release release;
          items = decode_segment(data, a.options);
        }
        return items_to_python(items, a.keys, make_tensor, data);
      },
      nb::arg("buffer").none(), nb::arg("strict"), nb::arg("key_class").none(),
      nb::arg("make_tensor"), nb::arg("make_key").none(), nb::arg("key_arity"),
      nb::arg("sample_key_rule"), nb::arg("copy"),
      "Decodes one HPB1 payload segment (SPEC 2) into a list of (key, value) pairs.");

  m.def(
      "decode_received",
      [](nb::handle buffer, const std::vector<std::uint64_t>& splits, bool strict,
         nb::object key_class, nb::handle make_tensor, nb::object make_key, std::size_t key_arity,
         bool sample_key_rule, bool copy) {
        DecodeArgs a = decode_args(strict, key_class, make_key, key_arity, sample_key_rule);
        SharedBytes data = segment_bytes(buffer, copy);
        std::vector<Item> items;
        {
          nb::gil_scoped_release release;
          items = merge_received(data, splits, a.options);
        }
        return items_to_python(items, a.keys, make_tensor, data);
      },
      nb::arg("buffer").none(), nb::arg("splits"), nb::arg("strict"), nb::arg("key_class").none(),
      nb::arg("make_tensor"), nb::arg("make_key").none(), nb::arg("key_arity"),
      nb::arg("sample_key_rule"), nb::arg("copy"),
      "Splits a received buffer by `splits`, decodes each segment and merges the items "
      "(SPEC 2.5: a key twice is an error).");

  m.def(
      "encode",
      [](nb::handle items, nb::object key_class, nb::handle raw_type, nb::handle convert,
         nb::handle key_type, nb::handle key_fields, nb::handle torch_tensor,
         nb::handle mapping_type) {
        FromPython from(raw_type, convert, torch_tensor, mapping_type);
        KeyFields key_of(key_type, key_fields);
        std::vector<Item> pairs;
        {
          GcPause pause;  // conversion makes many short-lived objects (torch.Size, ints)
          std::size_t index = 0;
          from.each(items, [&](nb::handle pair) {
            if (!PyTuple_Check(pair.ptr()) || PyTuple_GET_SIZE(pair.ptr()) != 2) {
              throw Error(Errc::invalid_argument, "items[" + std::to_string(index) +
                                                      "] must be a (key, value) pair, got " +
                                                      repr_text(pair));
            }
            nb::handle key = PyTuple_GET_ITEM(pair.ptr(), 0);
            nb::handle value = PyTuple_GET_ITEM(pair.ptr(), 1);
            // SPEC 2.6: an error names the path to what could not be converted.
            auto named = [&](const char* part, auto&& convert) -> Value {
              try {
                return below(convert, [] { return std::string(); });
              } catch (const PathError& e) {
                throw Error(e.code, "cannot encode segment: items[" + std::to_string(index) + "]." +
                                        part + e.path() + ": " + e.message);
              }
            };
            Value k = named("key", [&] {
              std::optional<Value> fields = key_of(key, from);
              return fields ? std::move(*fields) : from(key, 0);
            });
            pairs.emplace_back(std::move(k), named("value", [&] { return from(value, 0); }));
            ++index;
          });
        }
        EncodeOptions options;
        if (!key_class.is_none()) options.key_class = key_class_from_python(key_class);
        // Planned, then written once, straight into the bytes object returned (an 8 MiB
        // segment was written to a vector and copied into the bytes: two fresh buffers).
        // With tensors read in place (`pending`), the GIL stays held to the end: no other
        // thread may change or free them before they are written, as none could while the
        // original copied them.
        std::optional<SegmentPlan> plan;
        if (from.pending.empty()) {
          nb::gil_scoped_release release;
          plan = plan_segment(pairs, options);
        } else {
          plan = plan_segment(pairs, options);
        }
        PyObject* out = PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(plan->size()));
        if (out == nullptr) throw nb::python_error();
        nb::object bytes = nb::steal(out);
        std::span<std::uint8_t> to(reinterpret_cast<std::uint8_t*>(PyBytes_AS_STRING(out)),
                                   plan->size());
        if (from.pending.empty()) {
          nb::gil_scoped_release release;
          plan->write_to(to);
        } else {
          plan->write_to(to);
        }
        return bytes;
      },
      nb::arg("items"), nb::arg("key_class").none(), nb::arg("raw_type"), nb::arg("convert"),
      nb::arg("key_type").none(), nb::arg("key_fields"), nb::arg("torch_tensor").none(),
      nb::arg("mapping_type"),
      "Encodes (key, value) pairs as one HPB1 payload segment (SPEC 2); keys that are "
      "instances of `key_type` are written as the tuple of their `key_fields`.");

  m.def(
      "inspect",
      [](nb::handle buffer, bool strict, nb::object key_class, std::uint64_t max_output_bytes) {
        DecodeOptions options;
        options.strict = strict;
        options.pickle.key_class =
            key_class.is_none() ? KeyClass(kDefaultKeyClass) : key_class_from_python(key_class);
        SharedBytes data = segment_bytes(buffer, /*copy=*/false);
        nb::gil_scoped_release release;
        return inspect_segment(data.span(), options, max_output_bytes);
      },
      nb::arg("buffer").none(), nb::arg("strict"), nb::arg("key_class").none(),
      nb::arg("max_output_bytes"), "The inspect view of a segment (hpref frame inspect's text).");

  m.def(
      "dtype_names",
      [] {
        std::vector<std::string> names;
        for (int i = 0; i < kDTypeCount; ++i) names.emplace_back(dtype_name(dtype_at(i)));
        return names;
      },
      "The SPEC 1.3 dtype names in table order.");

  m.def(
      "quantized_dtype_names",
      [] {
        std::vector<std::string> names;
        for (int i = 0; i < kDTypeCount; ++i) {
          if (is_quantized(dtype_at(i))) names.emplace_back(dtype_name(dtype_at(i)));
        }
        return names;
      },
      "The SPEC 1.3 names of PyTorch's quantized dtypes (a scale and zero point not on the "
      "wire).");
}

}  // namespace hpref::py
