// --trace FILE: the Chrome trace of the traced steps, every rank's spans in one file.
#ifndef DSRT_DRIVER_TRACE_FILE_H
#define DSRT_DRIVER_TRACE_FILE_H

#include "group.h"
#include "program.h"

#include <string>

namespace dsrt::driver {

/// Takes this rank's recorded spans, gathers every rank's at rank 0, and writes there the
/// Chrome trace `path` (the JSON object format that Perfetto and chrome://tracing open): each
/// rank a process, each stream a thread, each span an "X" event named by the ds op and its
/// source location (the metadata's "sites"), or by the runtime call where none. Every rank
/// calls it. Returns "" or rank 0's error.
std::string writeTrace(dsrt_context *ctx, const Group &group, const ProgramSpec &p,
                       const std::string &path);

/// Whether `path` can be written: created (empty) now, so that a bad path is an error before
/// the first step.
std::string checkTracePath(const std::string &path);

} // namespace dsrt::driver

#endif
