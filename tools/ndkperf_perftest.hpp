// ndkperf ib_write_bw | ib_read_bw | ib_send_bw: perftest's rdma_cm protocol (`-R`) over softndk (issue 8 §2).
#pragma once

namespace ndkperf {

// argv[0] is the tool's name ("ib_write_bw", …); the rest are perftest's flags. Returns the exit status.
int RunPerftest(int argc, char** argv);

}  // namespace ndkperf
