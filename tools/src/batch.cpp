// The JSON-lines loop shared by the batch commands.
#include "hpref/cli/batch.hpp"

#include <istream>
#include <ostream>
#include <string>

#include "hpref/error.hpp"

namespace hpref::cli {

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
    Json request = parse_json(line);
    if (!request.is_object()) {
      throw Error(Errc::invalid_request, "a request must be a JSON object");
    }
    if (auto it = request.find("id"); it != request.end()) {
      id = *it;
      has_id = true;
    }
    answer = handle(request);
  } catch (const Error& e) {
    answer = Json{{"ok", false}, {"kind", std::string(e.kind())}, {"error", e.what()}};
  } catch (const std::bad_alloc&) {
    answer = Json{{"ok", false}, {"kind", "internal"}, {"error", "out of memory"}};
  }
  if (has_id) answer["id"] = id;
  return answer;
}

std::size_t run_batch(std::istream& in, std::ostream& out, const RequestHandler& handle) {
  std::string line;
  std::size_t refused = 0;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    Json answer = answer_line(line, handle);
    if (!answer["ok"].get<bool>()) ++refused;
    out << dump_json(answer) << '\n';
    out.flush();
  }
  return refused;
}

}  // namespace hpref::cli
