//===- queue.h - work on a group's communication thread (not installed) -------===//
//
// What a collective made of several channel calls (expert parallelism's token exchange) needs
// from comm.cpp: a place in its group's queue, behind the collectives issued before it.
//
#ifndef DSRT_COMM_QUEUE_H
#define DSRT_COMM_QUEUE_H

#include "channel.h"

#include "dsrt/dsrt.h"

#include <functional>
#include <initializer_list>
#include <string>

namespace dsrt {

/// Queues `work` on `group`'s communication thread (DSRT_GROUP_WORLD or a mask of mesh axes)
/// after everything issued to the group before it; the event completes when it has run.
/// `tensors` stay alive until then; `what` and `detail` name it in traces and timeout reports.
/// `what` also names the caller in errors.
dsrt_event *enqueueOnGroup(dsrt_context *ctx, int32_t group, const char *what,
                           std::initializer_list<const dsrt_tensor *> tensors, std::string detail,
                           std::function<void(Channel &, const CommOp &)> work);

} // namespace dsrt

#endif // DSRT_COMM_QUEUE_H
