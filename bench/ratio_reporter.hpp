// A Google Benchmark console reporter that also keeps each run's time per iteration by
// name, so a benchmark program can print ratios between runs of the same process.
#pragma once

#include <benchmark/benchmark.h>

#include <map>
#include <string>

namespace hpref::bench {

class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      if (run.run_type == Run::RT_Iteration && run.iterations > 0 && !run.error_occurred) {
        times_[run.benchmark_name()] = run.GetAdjustedRealTime();
      }
    }
    ConsoleReporter::ReportRuns(runs);
  }
  // Time per iteration of a run, in the run's time unit; NaN if it did not run.
  double time(const std::string& name) const {
    auto it = times_.find(name);
    return it == times_.end() ? 0.0 / 0.0 : it->second;
  }

 private:
  std::map<std::string, double> times_;
};

}  // namespace hpref::bench
