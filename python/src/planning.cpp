// hpref._core: the pure planners of SPEC 3 and 6 for Python: the data topology, the group
// plan and the model-batch layout. Each function takes plain Python values and returns a
// dict of plain values; python/hpref/planning.py turns them into frozen dataclasses.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common.hpp"
#include "hpref/dtype.hpp"
#include "hpref/error.hpp"
#include "hpref/group_plan.hpp"
#include "hpref/model_batch.hpp"
#include "hpref/topology.hpp"
#include "hpref/value.hpp"

namespace hpref::py {
namespace {

using Names = std::vector<std::string>;
using OptionalNames = std::optional<Names>;

DataTopology make_topology(std::vector<std::int64_t> shape, Names names, std::vector<int> ranks,
                           int global_rank, OptionalNames dp) {
  return DataTopology(TopologyInputs{std::move(shape), std::move(names), std::move(ranks),
                                     global_rank, std::move(dp)});
}

nb::dict topology_dict(const DataTopology& t) {
  nb::dict d;
  d["mesh_shape"] = t.mesh_shape();
  d["mesh_dim_names"] = t.mesh_dim_names();
  d["rank_list"] = t.rank_list();
  d["global_rank"] = t.global_rank();
  d["dp_dim_names"] = t.dp_dim_names();
  d["coordinate"] = t.coordinate();
  d["data_parallel_size"] = t.data_parallel_size();
  d["data_rank"] = t.data_rank();
  d["constructor_ranks"] = t.constructor_ranks();
  d["model_parallel_rank_groups"] = t.model_parallel_rank_groups();
  d["constructor_rank"] = t.constructor_rank();
  d["model_parallel_ranks"] = t.model_parallel_ranks();
  d["fingerprint"] = t.fingerprint();
  d["canonical_text"] = t.canonical_text();
  return d;
}

nb::object index_or_none(const std::optional<std::size_t>& i) {
  return i ? nb::object(nb::int_(*i)) : nb::none();
}

nb::dict plan_dict(const GroupPlan& p) {
  nb::dict d;
  d["data_plane_ranks"] = p.data_plane_ranks;
  d["planner_rank"] = p.planner_rank;
  d["distributed"] = p.distributed;
  d["payload_backend"] = p.payload_backend;
  d["payload_reuses_control"] = p.payload_reuses_control;
  d["tensor_backend"] = p.tensor_backend;
  nb::list creations;
  for (const GroupCreation& c : p.creations) {
    std::string_view role = group_role_name(c.role);
    creations.append(nb::make_tuple(nb::str(role.data(), role.size()), c.ranks, c.backend));
  }
  d["creations"] = creations;
  d["control"] = index_or_none(p.control);
  d["payload"] = index_or_none(p.payload);
  d["model_parallel"] = index_or_none(p.model_parallel);
  d["model_parallel_tensor"] = index_or_none(p.model_parallel_tensor);
  return d;
}

// (name, dtype name as "torch.float32", placement "cpu"|"accelerator", dims) per field.
using FieldTuple = std::tuple<std::string, std::string, std::string, std::vector<Dim>>;

ModelBatchLayout make_layout(const std::vector<FieldTuple>& fields) {
  std::vector<FieldSpec> specs;
  for (const auto& [name, dtype, placement, dims] : fields) {
    Placement where;
    if (placement == "cpu") {
      where = Placement::cpu;
    } else if (placement == "accelerator") {
      where = Placement::accelerator;
    } else {
      throw Error(Errc::batch_spec, "batch field '" + name + "' has placement '" + placement +
                                        "', not cpu or accelerator");
    }
    specs.push_back(FieldSpec{name, parse_dtype(dtype), where, dims});
  }
  return ModelBatchLayout(std::move(specs));
}

}  // namespace

void bind_planning(nb::module_& m) {
  m.def(
      "topology",
      [](std::vector<std::int64_t> shape, Names names, std::vector<int> ranks, int global_rank,
         OptionalNames dp) {
        return topology_dict(make_topology(std::move(shape), std::move(names), std::move(ranks),
                                           global_rank, std::move(dp)));
      },
      nb::arg("mesh_shape"), nb::arg("mesh_dim_names"), nb::arg("rank_list"),
      nb::arg("global_rank"), nb::arg("dp_dim_names").none(),
      "SPEC 3.1: a named device mesh seen from one rank.");
  m.def(
      "group_plan",
      [](std::vector<std::int64_t> shape, Names names, std::vector<int> ranks, int global_rank,
         OptionalNames dp, std::vector<int> readers, int planner, std::string cpu_backend,
         std::optional<std::string> payload_backend,
         std::optional<std::string> communication_device, bool enable_payload_exchange,
         std::optional<std::string> model_device, bool distributed, int world_size, int rank,
         std::string world_backend) {
        DataTopology topo = make_topology(std::move(shape), std::move(names), std::move(ranks),
                                          global_rank, std::move(dp));
        GroupPlanInputs in{&topo,
                           std::move(readers),
                           planner,
                           std::move(cpu_backend),
                           std::move(payload_backend),
                           std::move(communication_device),
                           enable_payload_exchange,
                           std::move(model_device),
                           distributed,
                           world_size,
                           rank,
                           std::move(world_backend)};
        return plan_dict(plan_groups(in));
      },
      nb::arg("mesh_shape"), nb::arg("mesh_dim_names"), nb::arg("rank_list"),
      nb::arg("global_rank"), nb::arg("dp_dim_names").none(), nb::arg("reader_ranks"),
      nb::arg("planner_rank"), nb::arg("cpu_backend"), nb::arg("payload_backend").none(),
      nb::arg("communication_device").none(), nb::arg("enable_payload_exchange"),
      nb::arg("model_device").none(), nb::arg("distributed"), nb::arg("world_size"),
      nb::arg("rank"), nb::arg("world_backend"),
      "SPEC 3.2: the process groups every rank creates, in order.");
  m.def(
      "batch_layout",
      [](const std::vector<FieldTuple>& fields) {
        ModelBatchLayout layout = make_layout(fields);
        nb::dict d;
        d["symbols"] = layout.symbols();
        // Each field's dtype by its canonical name ("half" -> "float16", SPEC 1.3).
        nb::list dtypes;
        for (const FieldSpec& f : layout.fields()) {
          std::string_view name = dtype_name(f.dtype);
          dtypes.append(nb::str(name.data(), name.size()));
        }
        d["dtypes"] = dtypes;
        d["canonical_text"] = layout.canonical_text();
        d["fingerprint"] = layout.fingerprint();
        return d;
      },
      nb::arg("fields"), "SPEC 6.1: a model-batch declaration's symbols and fingerprint.");
  m.def(
      "batch_header",
      [](const std::vector<FieldTuple>& fields, nb::handle entries, std::int64_t status) {
        ModelBatchLayout layout = make_layout(fields);
        if (entries.is_none()) {
          if (status != kEndOfData && status != kBatchFailed) {
            throw Error(Errc::batch_header,
                        "a header without a batch has status 0 (end of data) or "
                        "-1 (failed), got " +
                            std::to_string(status));
          }
          return layout.header(status);
        }
        std::vector<Value::Entry> batch;
        std::map<std::string, std::string> labels;  // fields whose value is not a tensor
        for (nb::handle item : entries) {           // (name, RawTensor or None, the value)
          nb::handle value = item[1];
          auto name = nb::cast<std::string>(item[0]);
          if (value.is_none()) labels[name] = "a Python " + py_type_name(item[2]);
          batch.emplace_back(Value::string(name), value.is_none()
                                                      ? Value::none()
                                                      : Value::tensor(tensor_from_python(value)));
        }
        auto label = [&labels](const std::string& field) {
          auto at = labels.find(field);
          return at == labels.end() ? std::string() : at->second;
        };
        return layout.header(layout.flatten(Value::mapping(std::move(batch)), label));
      },
      nb::arg("fields"), nb::arg("entries").none(), nb::arg("status"),
      "SPEC 6.2: the int64 header [status, symbol values...] of a batch or a status.");
  m.def(
      "batch_header_status",
      [](const std::vector<FieldTuple>& fields, const std::vector<std::int64_t>& header) {
        return make_layout(fields).header_status(header);
      },
      nb::arg("fields"), nb::arg("header"), "SPEC 6.3: the status of a received header.");
  m.def(
      "batch_shapes",
      [](const std::vector<FieldTuple>& fields, const std::vector<std::int64_t>& header,
         std::uint64_t max_message_bytes) {
        return make_layout(fields).shapes(header, max_message_bytes);
      },
      nb::arg("fields"), nb::arg("header"), nb::arg("max_message_bytes"),
      "SPEC 6.3: every field's shape from a status-1 header, checked before allocating.");
}

}  // namespace hpref::py
