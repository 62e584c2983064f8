// Thread-local text describing the last failure, read through SoftNdkGetLastErrorText().
#pragma once

namespace softndk {

// printf-style; also echoed to stderr when SOFTNDK_LOG is set.
void SetLastErrorText(const char* format, ...) __attribute__((format(printf, 1, 2)));
void ClearLastErrorText();

}  // namespace softndk
