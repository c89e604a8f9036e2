// Errors: every refusal in hpref is an hpref::Error carrying a kind (an Errc code
// with a stable snake_case name) and one sentence naming the offending value.
// Internal invariants that only our own bug can break use HPREF_CHECK*.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace hpref {

// X-macro: code, then the stable kind name printed in JSON answers.
#define HPREF_ERROR_KINDS(X)                                       \
  /* SPEC 1: values, tensors, dtypes, keys */                      \
  X(invalid_dtype)                                                 \
  X(unsupported_dtype)                                             \
  X(invalid_tensor)                                                \
  X(invalid_utf8)                                                  \
  X(unhashable_key)                                                \
  X(duplicate_key)                                                 \
  X(invalid_sample_key)                                            \
  /* SPEC 2.3: the metadata pickle */                              \
  X(pickle_truncated)                                              \
  X(pickle_opcode)                                                 \
  X(pickle_global)                                                 \
  X(pickle_reduce)                                                 \
  X(pickle_protocol)                                               \
  X(pickle_trailing_bytes)                                         \
  X(pickle_stack)                                                  \
  X(pickle_int_range)                                              \
  X(pickle_invalid_utf8)                                           \
  X(pickle_unhashable_key)                                         \
  X(pickle_duplicate_key)                                          \
  X(pickle_memo_missing)                                           \
  X(pickle_frozen_mutation)                                        \
  X(pickle_depth_limit)                                            \
  X(pickle_memo_limit)                                             \
  X(pickle_node_limit)                                             \
  X(pickle_stack_limit)                                            \
  X(pickle_unwritable)                                             \
  /* SPEC 2.1, 2.2, 2.4: segments */                               \
  X(truncated_header)                                              \
  X(frame_size_mismatch)                                           \
  X(metadata_not_pairs)                                            \
  X(invalid_schema_node)                                           \
  X(unknown_schema_tag)                                            \
  X(schema_field_count)                                            \
  X(invalid_shape)                                                 \
  X(invalid_byte_range)                                            \
  X(range_out_of_bounds)                                           \
  X(tensor_size_mismatch)                                          \
  X(non_canonical_layout)                                          \
  X(duplicate_mapping_key)                                         \
  X(decode_copy_limit)                                             \
  /* SPEC 2.5: merging a received buffer */                        \
  X(split_sum_mismatch)                                            \
  X(duplicate_payload_key)                                         \
  /* SPEC 2.6: encoding */                                         \
  X(depth_limit)                                                   \
  X(unencodable_value)                                             \
  /* SPEC 7: sequence dispatch routes */                           \
  X(route_owner_count)                                             \
  X(route_no_intervals)                                            \
  X(route_owner_start)                                             \
  X(route_rank)                                                    \
  X(route_owner_order)                                             \
  X(route_interval)                                                \
  X(route_local_length)                                            \
  X(route_arguments)                                               \
  X(route_boundaries)                                              \
  X(route_overflow)                                                \
  X(route_too_large)                                               \
  /* SPEC 3.1: data topology */                                    \
  X(topology_shape)                                                \
  X(topology_names)                                                \
  X(topology_rank_list)                                            \
  X(topology_global_rank)                                          \
  X(topology_dp_names)                                             \
  /* SPEC 3.2: group planning, one kind per check */               \
  X(group_planner)                                                 \
  X(group_not_distributed)                                         \
  X(group_mesh_world)                                              \
  X(group_rank)                                                    \
  X(group_cpu_backend)                                             \
  X(group_payload_backend)                                         \
  X(group_payload_device)                                          \
  X(group_device)                                                  \
  /* SPEC 6.1-6.3: model batch spec, layout and header */          \
  X(batch_spec)                                                    \
  X(batch_missing_field)                                           \
  X(batch_unknown_field)                                           \
  X(batch_dtype)                                                   \
  X(batch_rank)                                                    \
  X(batch_dim)                                                     \
  X(batch_symbol)                                                  \
  X(batch_header)                                                  \
  X(batch_size_limit)                                              \
  /* SPEC 8: the global oracle */                                  \
  X(oracle_mismatch)                                               \
  X(unsupported_arithmetic)                                        \
  /* SPEC 9: communicators */                                      \
  X(comm_mismatch)                                                 \
  X(comm_deadlock)                                                 \
  X(comm_peer_failed)                                              \
  X(comm_timeout)                                                  \
  X(comm_buffer_mutated)                                           \
  X(comm_memory_space)                                             \
  X(comm_usage)                                                    \
  X(comm_resource)                                                 \
  X(comm_backend)                                                  \
  /* SPEC 4-6, 8: transports and dispatch */                       \
  X(transport_not_member)                                          \
  X(transport_device)                                              \
  X(transport_size_limit)                                          \
  X(transport_limit_mismatch)                                      \
  X(exchange_refused)                                              \
  X(transport_targets)                                             \
  X(transport_no_payload_group)                                    \
  X(transport_spec_mismatch)                                       \
  X(transport_constructor_failed)                                  \
  X(dispatch_axis)                                                 \
  X(dispatch_length)                                               \
  X(dispatch_group)                                                \
  X(dispatch_reused)                                               \
  X(dispatch_route)                                                \
  /* simulator scenarios: a check of the scenario itself failed */ \
  X(scenario_check)                                                \
  /* tools: the CLI's JSON interchange and usage */                \
  X(json_syntax)                                                   \
  X(json_value)                                                    \
  X(invalid_argument)                                              \
  X(invalid_request)                                               \
  X(io)                                                            \
  X(output_limit)                                                  \
  /* our own bug */                                                \
  X(internal)

enum class Errc {
#define HPREF_ERRC_ENUM(name) name,
  HPREF_ERROR_KINDS(HPREF_ERRC_ENUM)
#undef HPREF_ERRC_ENUM
};

// The stable name of a kind ("frame_size_mismatch").
std::string_view errc_name(Errc code) noexcept;

class Error : public std::runtime_error {
 public:
  Error(Errc code, const std::string& message)
      : std::runtime_error(visible(message)), code_(code) {}
  Errc code() const noexcept { return code_; }
  std::string_view kind() const noexcept { return errc_name(code_); }

 private:
  // what() is a C string: a message quoting a value that holds a NUL byte would end there,
  // losing what is wrong and why. Each NUL is written \x00.
  static std::string visible(const std::string& message);
  Errc code_;
};

namespace detail {
[[noreturn]] void check_failed(const char* file, int line, const std::string& what);
}  // namespace detail

}  // namespace hpref

// Internal invariant checks: a failure is our bug, reported with file:line and values.
#define HPREF_CHECK(cond)                                                               \
  do {                                                                                  \
    if (!(cond)) ::hpref::detail::check_failed(__FILE__, __LINE__, "CHECK(" #cond ")"); \
  } while (0)
#define HPREF_CHECK_EQ(a, b)                                                           \
  do {                                                                                 \
    const auto& hpref_a_ = (a);                                                        \
    const auto& hpref_b_ = (b);                                                        \
    if (!(hpref_a_ == hpref_b_)) {                                                     \
      std::ostringstream hpref_os_;                                                    \
      hpref_os_ << "CHECK_EQ(" #a ", " #b ") with " << hpref_a_ << " != " << hpref_b_; \
      ::hpref::detail::check_failed(__FILE__, __LINE__, hpref_os_.str());              \
    }                                                                                  \
  } while (0)
