// The series Prometheus client libraries export for every process (the "process_" metrics of
// https://prometheus.io/docs/instrumenting/writing_clientlibs/#process-metrics), read from /proc at
// scrape time, and tribunal_build_info: what a dashboard needs to tell a restarted or upgraded node.
#pragma once

#include "nodes/metrics.h"

namespace tribunal::nodes {

/// Registers in `metrics`: process_resident_memory_bytes, process_virtual_memory_bytes,
/// process_open_fds, process_max_fds, process_start_time_seconds (gauges, read at scrape time from
/// /proc/self; a value /proc does not give reads as NaN) and tribunal_build_info{version, contract} = 1
/// (the release and kRepOpsContractVersion, engine/job.h). Call once per registry.
void add_process_metrics(MetricsRegistry& metrics);

}  // namespace tribunal::nodes
