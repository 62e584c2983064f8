#include "common/last_error.h"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>

#include <softndk/wdm.h>

namespace softndk {
namespace {
thread_local char t_last_error[512];
bool LogEnabled() {
    static const bool echo = std::getenv("SOFTNDK_LOG") != nullptr;
    return echo;
}
}  // namespace

void SetLastErrorText(const char* format, ...) {
    va_list args;
    va_start(args, format);
    vsnprintf(t_last_error, sizeof(t_last_error), format, args);
    va_end(args);
    if (LogEnabled()) std::fprintf(stderr, "softndk: %s\n", t_last_error);
}

void LogText(const char* format, ...) {
    if (!LogEnabled()) return;
    char text[512];
    va_list args;
    va_start(args, format);
    vsnprintf(text, sizeof(text), format, args);
    va_end(args);
    std::fprintf(stderr, "softndk: %s\n", text);
}

void ClearLastErrorText() {
    t_last_error[0] = '\0';
}

}  // namespace softndk

extern "C" const char* SoftNdkGetLastErrorText(void) {
    return softndk::t_last_error;
}

extern "C" VOID SoftNdkClearLastErrorText(void) {
    softndk::ClearLastErrorText();
}
