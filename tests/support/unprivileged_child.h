// Runs `body` in a forked child without CAP_IPC_LOCK and with RLIMIT_MEMLOCK = `memlock` bytes, as an
// unprivileged user would run; returns the child's exit status (kCannotDrop when the capability cannot be
// dropped here, so the caller skips).
#pragma once

#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>

namespace softndk::test {

inline constexpr int kCannotDrop = 3;

inline int RunUnprivileged(rlim_t memlock, const std::function<int()>& body) {
    const pid_t child = fork();
    if (child < 0) return -1;
    if (child == 0) {
        __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
        __user_cap_data_struct caps[2]{};
        if (syscall(SYS_capget, &header, caps) != 0) _exit(kCannotDrop);
        caps[0].effective &= ~(1u << CAP_IPC_LOCK);
        caps[0].permitted &= ~(1u << CAP_IPC_LOCK);
        if (syscall(SYS_capset, &header, caps) != 0) _exit(kCannotDrop);
        rlimit low{memlock, memlock};
        if (setrlimit(RLIMIT_MEMLOCK, &low) != 0) _exit(kCannotDrop);
        _exit(body());
    }
    int status = 0;
    waitpid(child, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace softndk::test
