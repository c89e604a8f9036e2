// The JSON-lines loop shared by the batch commands.
#include "hpref/cli/batch.hpp"

#include <exception>
#include <istream>
#include <limits>
#include <new>
#include <ostream>
#include <string>

#include "hpref/error.hpp"

namespace hpref::cli {
namespace {

// Written when even the answer cannot be built: a literal, so that writing it allocates
// nothing.
constexpr std::string_view kOutOfMemoryAnswer =
    R"({"ok": false, "kind": "internal", "error": "out of memory while answering this line"})";

Json refusal(std::string_view kind, const std::string& message) {
  return Json{{"ok", false}, {"kind", std::string(kind)}, {"error", message}};
}

}  // namespace

const Json& required_field(const Json& request, const char* name) {
  auto it = request.find(name);
  if (it == request.end()) {
    throw Error(Errc::invalid_request, std::string("request has no \"") + name + "\" field");
  }
  return *it;
}

Json answer_line(std::string_view line, const RequestHandler& handle) {
  Json id;
  bool has_id = false;
  Json answer;
  try {
    Json answer_body;
    {
      JsonParseInfo info;
      Json request = parse_json(line, &info);
      if (!request.is_object()) {
        throw Error(Errc::invalid_request, "a request must be a JSON object");
      }
      if (auto it = request.find("id"); it != request.end()) {
        if (info.id_inexact) {
          // The number as written: the parsed one ("1.5" for 1.50) is what would change.
          throw Error(Errc::invalid_request,
                      "the \"id\" holds the number " + shortened(info.id_inexact_number, 40) +
                          ", which cannot be echoed exactly (use a string, an integer within "
                          "64 bits, or a float in its shortest form)");
        }
        id = *it;
        has_id = true;
      }
      answer_body = handle(request);
    }  // the request is freed here, inside the try
    answer = std::move(answer_body);
  } catch (const Error& e) {
    answer = refusal(e.kind(), e.what());
  } catch (const std::bad_alloc&) {
    answer = refusal("internal", "out of memory");
  } catch (const std::exception& e) {
    answer = refusal("internal", std::string("unexpected failure: ") + e.what());
  }
  if (has_id) answer["id"] = std::move(id);
  return answer;
}

BatchCounts run_batch(std::istream& in, std::ostream& out, const RequestHandler& handle) {
  // With badbit in the mask, getline rethrows the bad_alloc of a line too long for memory
  // (instead of only setting badbit), so that the line is answered and skipped.
  struct RestoreMask {
    std::istream& in;
    std::ios::iostate mask;
    ~RestoreMask() { in.exceptions(mask); }
  } restore{in, in.exceptions()};
  in.exceptions(std::ios::badbit);
  BatchCounts counts;
  std::string line;
  for (;;) {
    bool ok = false;
    bool oom = false;
    bool line_read = false;
    try {
      if (!std::getline(in, line)) break;
      line_read = true;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      std::string text;
      {
        Json answer = answer_line(line, handle);
        auto it = answer.find("ok");
        ok = it != answer.end() && it->is_boolean() && it->get<bool>();
        text = dump_json(answer);
      }
      text.push_back('\n');
      line.clear();
      out << text;
    } catch (const std::bad_alloc&) {
      oom = true;
    } catch (const std::ios_base::failure&) {
      throw Error(Errc::io, "cannot read the batch input");
    }
    if (oom) {
      // Free what this line held, skip what getline could not read of it, and answer it.
      std::string().swap(line);
      if (!line_read) {
        in.clear();
        in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
      }
      out.write(kOutOfMemoryAnswer.data(), static_cast<std::streamsize>(kOutOfMemoryAnswer.size()));
      out.put('\n');
    }
    ++counts.answered;
    if (!ok) ++counts.refused;
    out.flush();
    if (!out) throw Error(Errc::io, "cannot write a batch answer to the output");
  }
  return counts;
}

}  // namespace hpref::cli
